"""The evaluation as a streaming Ray Data job.

    python -m ray_jobs.evaluate --config configs/paper_table3.yaml        (also: t2rag eval --runner ray)

The core plans the work (t2rag.stages.work) and each group of rows streams through its method's core stages,
placed by ray_jobs.placement: query embedding on GPU actors, retrieval in actors holding the LanceDB tables and BM25
matrices, reranking, prompts, generation and parsing. Groups of different methods share the pools of the stages they
have in common (one embedding pool, one retrieval pool per kind of row). Every generation of the run (context
summaries, HyDE's documents, answers) goes to one generator service (ray_jobs.generator_service), so the model is
loaded once per replica per run.
Records are written as parquet blocks as they finish, each whole or absent (ray_jobs.records_sink); the result comes
from them through the same function as the other runner's. Rerunning a config into the same `out` (on either runner)
skips every (method, question) that already has a record, so a killed job loses at most its in-flight blocks; within
a run, a fault (a lost node, a dead engine) starts another attempt at what is missing (`max_attempts`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator

from ray_jobs.build_index import build_indexes
from ray_jobs.common import count_loads_on_meter, log_stage_lines, ray_session, read_meter, stage_meter
from ray_jobs.durable import durable
from ray_jobs.generator_service import GeneratorService
from ray_jobs.placement import place, place_together, union
from ray_jobs.preflight import pools_of, require_fit
from ray_jobs.table_blocks import dataset_from_table
from t2rag.config import RunConfig, load_config
from t2rag.errors import T2RagError, first_line
from t2rag.methods import ANSWER_TAIL
from t2rag.pipeline.lifecycle import run_lifecycle
from t2rag.pools import PoolShape
from t2rag.progress import StageLog
from t2rag.quiet import quiet_libraries
from t2rag.resources import Resources
from t2rag.run_folder.records import to_answer_inputs, to_records
from t2rag.stages.work import WorkGroup, split_chain, work_left

log = logging.getLogger("t2rag.progress")


def placed_work(config: RunConfig, work: list[WorkGroup], service: GeneratorService | None = None):
    """One dataset of records for all the planned groups, every stage placed on the cluster.

    A group's chain is cut after its last generation (HyDE's query): what comes before runs on the group's own
    placement. The rest is placed once for every group that ends the same way (`place_together`): retrieval-only
    rows to their records, answered rows to their prompts and then through one answering tail, so a run starts one
    embedding pool per kind of row; every generation goes to the run's generator `service`."""
    retrieval_only, answering = [], []
    for group in work:
        own, rest, answers = split_chain(group.stages)
        block_rows = config.ray.block_rows if group.generates else config.ray.retrieve_block_rows
        ds = place(dataset_from_table(group.rows, block_rows), own, config, service)
        (answering if answers else retrieval_only).append((ds, rest))
    out = []
    if retrieval_only:
        out.append(place_together(retrieval_only, config, service).map_batches(to_records, batch_format="pyarrow"))
    if answering:
        prompts = place_together(answering, config, service).map_batches(to_answer_inputs, batch_format="pyarrow")
        out.append(place(prompts, ANSWER_TAIL, config, service).map_batches(to_records, batch_format="pyarrow"))
    return union(out)


def run_ray(config: RunConfig, overwrite: bool = False) -> dict:
    """Run the evaluation on Ray and return the same result as the single-process runner.

    A run whose pools cannot be placed on the cluster is refused first (`ray_jobs.preflight.PlacementError`).
    Then up to `max_attempts` attempts (`run_attempts`) compute what is missing, against one generator service
    held for the whole run: a lost node or a failed job costs its blocks in flight and the next attempt resumes."""
    config = durable(config)  # inside a Ray job: nothing written where it vanishes with the job
    resources = Resources(config, log=StageLog())
    return run_lifecycle(config, resources, RayRunner(config, resources), overwrite)


class RayRunner:
    """The lifecycle's `Runner` on Ray: each attempt builds the indexes on the cluster and streams the work left
    through the placed stages, every generation going to the run's one generator service."""

    name = "ray"

    def __init__(self, config: RunConfig, resources: Resources):
        self.config = config
        self.resources = resources
        self.service: GeneratorService | None = None
        self.indexes: list[dict] = []
        self.meter = None

    def session(self) -> contextlib.AbstractContextManager[None]:
        return ray_session(self.config.ray)

    def check_fit(self) -> None:
        require_fit(self.config, self.resources)

    def embedding_shapes(self, work: list[WorkGroup]) -> dict[str, PoolShape]:
        shapes = {p.role: p.shape for p in pools_of(self.config, self.resources, work)}
        return {r: s for r, s in shapes.items() if r in ("passages", "queries")}

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        with GeneratorService(self.config) as service:
            self.service = service
            self.meter = stage_meter()
            read_meter(self.meter, "reset")
            count_loads_on_meter()  # the driver's own loads (none, unless it builds something itself)
            try:
                yield
            finally:
                self.service = None

    def compute(self, done: set[tuple[str, str]]) -> None:
        from ray_jobs.records_sink import RecordsSink

        config, resources, stage_log = self.config, self.resources, self.resources.log
        with stage_log.stage("build_index", 0):
            self.indexes[:] = build_indexes(config, resources, self.service)
        work = work_left(config, resources.questions, done)
        rows = sum(g.rows.num_rows for g in work)
        log.info("evaluate: %d records to compute (%d already done)", rows, len(done))
        with stage_log.stage("pipeline", rows):
            placed_work(config, work, self.service).write_datasink(RecordsSink(config.out))

    def model_loads(self) -> dict[str, int]:
        return read_meter(self.meter, "model_loads")

    def manifest_extra(self) -> dict:
        import ray

        return {
            "ray_stages": log_stage_lines(read_meter(self.meter)),
            "indexes": self.indexes,
            "cluster_resources": ray.cluster_resources(),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", default=None, help="override the config's output location")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet_libraries()
    try:
        config = load_config(args.config, {"out": args.out} if args.out else None)
        with contextlib.redirect_stdout(sys.stderr):  # Ray's forwarded worker lines must not mix with the JSON
            result = run_ray(config, overwrite=args.overwrite)
            if config.tracking.mlflow is not None:
                from t2rag.results.tracking import log_single_run

                result["mlflow_run_id"] = log_single_run(config, result["out"])
    except Exception as exc:  # one line and a non-zero exit: an escaped exception can hang in Ray's hook
        log.debug("the job failed", exc_info=True)
        print(f"ray_jobs.evaluate: error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, T2RagError) else 1
    print(json.dumps(result), flush=True)
    out = result["out"]  # where run_ray wrote them (durable: under T2RAG_STORAGE when it is set)
    print(f"ray_jobs.evaluate: results in {out} (records/, result.json; t2rag report {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
