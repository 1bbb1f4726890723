"""The single-process engine: the planned work through its stages, in this process, one block at a time."""

from __future__ import annotations

import logging
import time

import pyarrow as pa

from t2rag.config import RunConfig
from t2rag.model_loads import loads, loads_since
from t2rag.pipeline.plan import WorkGroup, plan_work
from t2rag.pipeline.records import new_part_name, to_records, write_records
from t2rag.pipeline.run import claim_run, finish_run, run_attempts
from t2rag.progress import Progress, StageLog
from t2rag.resources import Resources
from t2rag.stages import STAGES, Stage
from t2rag.stages.base import run_chain

log = logging.getLogger(__name__)

#: Rows per block. Generating blocks are small so a long run reports progress and is resumable as it goes (one
#: row for llama.cpp, which answers one request at a time anyway); a retrieval block holds thousands of
#: (method, question) rows, so each question is embedded once for all the methods that share it and every search
#: is a large block.
GENERATE_BLOCK_ROWS = 8
RETRIEVE_BLOCK_ROWS = 4096


class LocalEngine:
    """Runs a RunConfig in this process and writes records, summary and manifest under `config.out`."""

    def __init__(self, config: RunConfig, resources: Resources | None = None):
        self.config = config
        self.log = StageLog()
        self.resources = resources or Resources(config, log=self.log)
        self.resources.log = self.log
        self._stages: dict[str, Stage] = {}

    def stage(self, name: str) -> Stage:
        """The named stage, built once for this process."""
        if name not in self._stages:
            self._stages[name] = STAGES[name](self.resources)
        return self._stages[name]

    def plan(self, done: set[tuple[str, str]]) -> list[WorkGroup]:
        return plan_work(self.config, self.resources.questions, done)

    def run(self, overwrite: bool = False) -> dict:
        started = time.time()
        before = loads()
        with claim_run(self.config, self.resources.questions, overwrite):
            try:
                attempts = run_attempts(self.config, self.config.max_attempts, self.pending, self.compute)
            finally:
                self.resources.close()
            return finish_run(
                self.config,
                self.log,
                started,
                "local",
                self.resources.data_description(),
                attempts,
                loads_since(before),
            )

    def pending(self, done: set[tuple[str, str]]) -> int:
        return sum(g.rows.num_rows for g in self.plan(done))

    def compute(self, done: set[tuple[str, str]]) -> None:
        work = self.plan(done)
        log.info("evaluate: %d records to compute (%d already done)", sum(g.rows.num_rows for g in work), len(done))
        for group in work:
            self.run_group(group)

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
        generator = self.config.generator
        return 1 if generator is not None and generator.one_prompt_at_a_time else GENERATE_BLOCK_ROWS

    def apply(self, stages: tuple[str, ...], batch: pa.Table, done: str = "") -> pa.Table:
        """Run a batch through the named stages in order."""
        steps = [(name, self.stage(name)) for name in stages]
        return run_chain(steps, batch, lambda name, rows, seconds: self.log.record(name, rows, seconds, done=done))


def run_local(config: RunConfig, overwrite: bool = False) -> dict:
    return LocalEngine(config).run(overwrite=overwrite)
