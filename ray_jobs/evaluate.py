"""The evaluation as a streaming Ray Data job.

    python -m ray_jobs.evaluate --config configs/paper_table3.yaml        (also: t2rag eval --engine ray)

The core plans the work (t2rag.pipeline.plan) and each group of rows streams through its method's core stages,
placed by ray_jobs.placement: query embedding on GPU actors, retrieval in actors holding the LanceDB tables and BM25
matrices, reranking, prompts, generation (vLLM's processor, or an actor pool of the CPU/HTTP engine) and parsing.
Groups of different methods share the pools of the stages they have in common (one embedding pool, one retrieval
pool per kind of row), and the answering stages are placed once for all of them, so a run starts one generator
(one vLLM engine).
Records are written as parquet blocks as they finish; the summary comes from them through the same function as
every other engine's. Rerunning a config into the same `out` (on either engine) skips every (method, question)
that already has a record, so a killed job loses at most its in-flight blocks.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time

from ray_jobs.build_index import build_indexes
from ray_jobs.common import log_stage_lines, ray_session, stage_meter
from ray_jobs.placement import place, place_together, split_chain, union
from ray_jobs.preflight import require_fit
from ray_jobs.table_blocks import dataset_from_table
from t2rag.config import RunConfig, load_config
from t2rag.methods import ANSWER_TAIL
from t2rag.pipeline.plan import WorkGroup, plan_work
from t2rag.pipeline.progress import StageLog
from t2rag.pipeline.records import RECORDS_DIR, to_answer_inputs, to_records
from t2rag.pipeline.run import claim_run, finish_run
from t2rag.quiet import quiet_libraries
from t2rag.resources import Resources
from t2rag.storage import join

log = logging.getLogger("t2rag.progress")


def plan(config: RunConfig, resources: Resources, done: set[tuple[str, str]]) -> list[WorkGroup]:
    """The core plan (the same as every engine's)."""
    return plan_work(config, resources.questions, done)


def placed_work(config: RunConfig, work: list[WorkGroup]):
    """One dataset of records for all the planned groups, every stage placed on the cluster.

    A group's chain is cut after its last generation (HyDE's query): what comes before runs on the group's own
    placement. The rest is placed once for every group that ends the same way (`place_together`): retrieval-only
    rows to their records, answered rows to their prompts and then through one answering tail, so a run starts one
    embedding pool per kind of row and one generator (one vLLM engine, or one pool of model-holding actors)."""
    retrieval_only, answering = [], []
    for group in work:
        own, rest, answers = split_chain(group.stages)
        block_rows = config.ray.block_rows if group.generates else config.ray.retrieve_block_rows
        ds = place(dataset_from_table(group.rows, block_rows), own, config)
        (answering if answers else retrieval_only).append((ds, rest))
    out = []
    if retrieval_only:
        out.append(place_together(retrieval_only, config).map_batches(to_records, batch_format="pyarrow"))
    if answering:
        prompts = place_together(answering, config).map_batches(to_answer_inputs, batch_format="pyarrow")
        out.append(place(prompts, ANSWER_TAIL, config).map_batches(to_records, batch_format="pyarrow"))
    return union(out)


def run_ray(config: RunConfig, overwrite: bool = False) -> dict:
    """Run the evaluation on Ray and return the same summary as the single-process engine; a run whose pools
    cannot be placed on the cluster is refused first (`ray_jobs.preflight.PlacementError`)."""
    started = time.time()
    stages = StageLog()
    resources = Resources(config, log=stages)
    with ray_session(config.ray):
        require_fit(config, resources)  # refuse in seconds what could never be placed, before any model loads
        with claim_run(config, resources.questions, overwrite) as done:
            return _run(config, resources, started, done)


def _run(config: RunConfig, resources: Resources, started: float, done: set[tuple[str, str]]) -> dict:
    import ray

    stages = resources.log
    meter = stage_meter()
    ray.get(meter.reset.remote())
    with stages.stage("build_index", 0):
        indexes = build_indexes(config, resources)
    work = plan(config, resources, done)
    pending = sum(g.rows.num_rows for g in work)
    log.info("evaluate: %d records to compute (%d already done)", pending, len(done))
    if pending:
        with stages.stage("pipeline", pending):
            placed_work(config, work).write_parquet(join(config.out, RECORDS_DIR))
    return finish_run(
        config,
        stages,
        started,
        "ray",
        resources.data_description(),
        ray_stages=log_stage_lines(ray.get(meter.report.remote())),
        indexes=indexes,
        cluster_resources=ray.cluster_resources(),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", default=None, help="override the config's output location")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet_libraries()
    config = load_config(args.config, {"out": args.out} if args.out else None)
    with contextlib.redirect_stdout(sys.stderr):  # Ray's forwarded worker lines must not mix with the JSON
        summary = run_ray(config, overwrite=args.overwrite)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
