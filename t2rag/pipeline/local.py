"""The single-process runner: the planned work through its stages, in this process, one block at a time."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.generation.prefix import prefix_order
from t2rag.generation.registry import engine_of
from t2rag.methods import ANSWER_TAIL
from t2rag.model_loads import loads, loads_since
from t2rag.pipeline.lifecycle import run_lifecycle
from t2rag.pools import PoolShape
from t2rag.progress import Progress, StageLog
from t2rag.resources import Resources
from t2rag.run_folder.files import new_part_name, write_records
from t2rag.run_folder.records import to_answer_inputs, to_records
from t2rag.stages import STAGES, Stage
from t2rag.stages.base import run_chain
from t2rag.stages.work import WorkGroup, split_chain, work_left

log = logging.getLogger(__name__)

#: Rows per block. Generating blocks are small so a long run reports progress and is resumable as it goes (one
#: row for llama.cpp, which answers one request at a time anyway); a retrieval block holds thousands of
#: (method, question) rows, so each question is embedded once for all the methods that share it and every search
#: is a large block.
GENERATE_BLOCK_ROWS = 8
RETRIEVE_BLOCK_ROWS = 4096
#: Questions whose answer prompts are ordered together by shared prefix (`generator.prefix_reuse`): the prompts of
#: every method for these questions are made, sorted, then answered block by block. It bounds the prompts held.
PREFIX_WINDOW_QUESTIONS = 1024


class LocalRunner:
    """Runs a RunConfig in this process and writes records, result and manifest under `config.out`: the
    lifecycle's `Runner` that computes every block here."""

    def __init__(self, config: RunConfig, resources: Resources | None = None, stages: dict[str, Stage] | None = None):
        """`stages` replace the named stages of this process (a sweep's trial sends `generate` to the sweep's
        shared generator service)."""
        self.config = config
        self.log = StageLog()
        self.resources = resources or Resources(config, log=self.log)
        self.resources.log = self.log
        self._stages: dict[str, Stage] = dict(stages or {})
        self._loads_before: dict[str, int] = loads()

    name = "local"

    def stage(self, name: str) -> Stage:
        """The named stage, built once for this process."""
        if name not in self._stages:
            self._stages[name] = STAGES[name](self.resources)
        return self._stages[name]

    def session(self) -> AbstractContextManager[None]:
        self._loads_before = loads()  # the run's loads, its probes' included
        return nullcontext()

    def check_fit(self) -> None:
        """Nothing to place: this process runs every stage."""

    def embedding_shapes(self, work: list[WorkGroup]) -> dict[str, PoolShape]:
        # This process embeds with every CPU it has: one pool of one actor, for passages and for queries alike.
        shape = PoolShape(1, float(os.cpu_count() or 1), 0.0)
        return {"passages": shape, "queries": shape}

    @contextmanager
    def serving(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.resources.close()

    def model_loads(self) -> dict[str, int]:
        return loads_since(self._loads_before)

    def manifest_extra(self) -> dict:
        return {}

    def run(self, overwrite: bool = False) -> dict:
        return run_lifecycle(self.config, self.resources, self, overwrite)

    def work_left(self, done: set[tuple[str, str]]) -> list[WorkGroup]:
        return work_left(self.config, self.resources.questions, done)

    def compute(self, done: set[tuple[str, str]]) -> None:
        work = self.work_left(done)
        log.info("evaluate: %d records to compute (%d already done)", sum(g.rows.num_rows for g in work), len(done))
        generator = self.config.generator
        by_prefix = generator is not None and generator.prefix_reuse
        answering = [g for g in work if by_prefix and split_chain(g.stages)[2]]
        for group in work:
            if not any(group is a for a in answering):
                self.run_group(group)
        if answering:
            self.run_answers(answering)

    def run_answers(self, work: list[WorkGroup]) -> None:
        """The answered rows of every method in shared-prefix order: for a window of questions (in the plan's
        order, which puts the questions of one context together), each group's stages up to its answer prompts,
        then all of the window's prompts sorted by prefix through the answering tail, block by block."""
        ids = _ordered_ids(work)
        total = sum(g.rows.num_rows for g in work)
        progress = Progress("generate: " + ", ".join(_methods(work)), total)
        written = 0
        for start in range(0, len(ids), PREFIX_WINDOW_QUESTIONS):
            window = pa.array(ids[start : start + PREFIX_WINDOW_QUESTIONS], pa.string())
            prompts = [self.answer_inputs(g, g.rows.filter(pc.is_in(g.rows.column("id"), window))) for g in work]
            inputs = pa.concat_tables([p for p in prompts if p.num_rows])
            inputs = inputs.take(pa.array(prefix_order(inputs.column("messages_json").to_pylist())))
            size = self.generate_block_rows()
            for offset in range(0, inputs.num_rows, size):
                batch = inputs.slice(offset, size)
                written += batch.num_rows
                records = to_records(self.apply(ANSWER_TAIL, batch, f"{written}/{total}"))
                write_records(self.config.out, records, new_part_name("local"))
                progress.advance(batch.num_rows)

    def answer_inputs(self, group: WorkGroup, rows: pa.Table) -> pa.Table:
        """The rows through their stages up to the answering tail: a generation before it (HyDE's document) in
        generating blocks, the rest (retrieval, prompts) at once."""
        if rows.num_rows == 0:
            return rows
        own, rest, _ = split_chain(group.stages)
        if own:
            size = self.generate_block_rows()
            rows = pa.concat_tables([self.apply(own, rows.slice(i, size)) for i in range(0, rows.num_rows, size)])
        return to_answer_inputs(self.apply(rest, rows))

    def run_group(self, group: WorkGroup) -> None:
        size = self.generate_block_rows() if group.generates else RETRIEVE_BLOCK_ROWS
        total = group.rows.num_rows
        methods = ", ".join(dict.fromkeys(group.rows.column("method").to_pylist()))
        progress = Progress(f"{'generate' if group.generates else 'retrieve'}: {methods}", total)
        for start in range(0, total, size):
            batch = group.rows.slice(start, size)
            done = f"{start + batch.num_rows}/{total}"
            write_records(self.config.out, to_records(self.apply(group.stages, batch, done)), new_part_name("local"))
            progress.advance(batch.num_rows)

    def generate_block_rows(self) -> int:
        # An engine that runs prompts one after another is as fast on a block of one row, and reports sooner.
        g = self.config.generator
        one_at_a_time = g is not None and engine_of(g).batching(g) == "one_at_a_time"
        return 1 if one_at_a_time else GENERATE_BLOCK_ROWS

    def apply(self, stages: tuple[str, ...], batch: pa.Table, done: str = "") -> pa.Table:
        """Run a batch through the named stages in order."""
        steps = [(name, self.stage(name)) for name in stages]
        return run_chain(steps, batch, lambda name, rows, seconds: self.log.record(name, rows, seconds, done=done))


def _ordered_ids(work: list[WorkGroup]) -> list[str]:
    """Question ids of the groups in the plan's order (by subset and gold context), each once."""
    keys = pa.concat_tables([g.rows.select(["subset", "context_id", "id"]) for g in work])
    keys = keys.append_column("_i", pa.array(range(keys.num_rows)))
    keys = keys.sort_by([("subset", "ascending"), ("context_id", "ascending"), ("_i", "ascending")])
    return list(dict.fromkeys(keys.column("id").to_pylist()))


def _methods(work: list[WorkGroup]) -> list[str]:
    return list(dict.fromkeys(m for g in work for m in g.rows.column("method").to_pylist()))


def run_local(config: RunConfig, overwrite: bool = False) -> dict:
    return LocalRunner(config).run(overwrite=overwrite)
