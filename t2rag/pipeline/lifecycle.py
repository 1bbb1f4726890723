"""One run lifecycle for every runner: the runner says how a block of work is computed, the lifecycle does the rest.

    result = run_lifecycle(config, resources, runner, overwrite)

In order: where the run runs (`runner.session`), refuse what cannot be placed (`runner.check_fit`), find the work
left, check its models, probe its plugins, plan it (`runner.embedding_shapes`), claim the run folder, hold what the
attempts share (`runner.serving`), attempt until nothing is missing (`runner.compute`), and finish with the result.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Protocol

from t2rag.config import RunConfig
from t2rag.estimate.plan_vs_run import plan_of_run
from t2rag.pipeline.model_check import require_models
from t2rag.pipeline.plugin_check import probe_plugins
from t2rag.pipeline.run import claim_run, finish_run, run_attempts
from t2rag.pools import PoolShape
from t2rag.resources import Resources
from t2rag.run_folder.files import done_keys
from t2rag.stages.work import WorkGroup, work_left


class Runner(Protocol):
    """What a runner supplies to the lifecycle."""

    name: str  # "local", "ray": the manifest's `runner`

    def session(self) -> AbstractContextManager[None]:
        """Where the run runs, for the whole run (a Ray connection; nothing for this process)."""

    def check_fit(self) -> None:
        """Refuse, before any model loads, a run that could never be placed."""

    def embedding_shapes(self, work: list[WorkGroup]) -> dict[str, PoolShape]:
        """The `passages` and `queries` embedding pools the plan prices."""

    def serving(self) -> AbstractContextManager[None]:
        """What every attempt shares (a generator service), released when the attempts end."""

    def compute(self, done: set[tuple[str, str]]) -> None:
        """Compute and write the records of every (method, question) not in `done`."""

    def model_loads(self) -> dict[str, int]:
        """How many times each model was loaded during the run."""

    def manifest_extra(self) -> dict:
        """What the runner adds to the manifest."""


def run_lifecycle(config: RunConfig, resources: Resources, runner: Runner, overwrite: bool = False) -> dict:
    """Run `config` with `runner` and return the run's result (also written to its folder)."""
    started = time.time()
    with runner.session():
        runner.check_fit()  # refuse in seconds what could never be placed, before any model loads
        work = work_left(config, resources.questions, done_keys(config.out))
        require_models(config, work)  # and what needs a model that cannot be had
        probe_plugins(config, resources)  # and a plugin retriever or reranker that answers in the wrong shape
        plan = plan_of_run(config, resources, work, runner.embedding_shapes(work))

        def pending(done: set[tuple[str, str]]) -> int:
            return sum(g.rows.num_rows for g in work_left(config, resources.questions, done))

        with claim_run(config, resources.questions, overwrite), runner.serving():
            attempts = run_attempts(config, config.max_attempts, pending, runner.compute)
            return finish_run(
                config,
                resources.log,
                started,
                runner.name,
                resources.data_description(),
                attempts,
                runner.model_loads(),
                plan,
                **runner.manifest_extra(),
            )
