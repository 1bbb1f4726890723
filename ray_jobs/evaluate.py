"""The evaluation as a streaming Ray Data job.

    python -m ray_jobs.evaluate --config configs/paper_table3.yaml        (also: t2rag eval --engine ray)

Questions stream through query embedding (GPU actors) -> retrieval (actors holding the LanceDB tables and BM25
matrices) -> reranking -> prompt building -> generation (vLLM's processor, or an actor pool of the CPU/HTTP engine)
-> parsing and scoring -> per-question records written as parquet blocks as they finish. A final reduce with Ray
Data aggregations computes the summary; only that summary reaches the driver. Rerunning a config into the same
`out` skips every (method, question) that already has a record, so a killed job loses at most its in-flight blocks.
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ray_jobs.build_index import build_indexes
from ray_jobs.common import config_kwargs, dataset_from_table, init_ray, log_stage_lines, stage_meter
from ray_jobs.generation import generate_dataset
from ray_jobs.stages import (
    BuildPrompts,
    EmbedQueries,
    HydePrompts,
    Rerank,
    Retrieve,
    hyde_to_query,
    parse_answers,
    to_records,
)
from t2rag.config import RunConfig, load_config
from t2rag.methods import get_method
from t2rag.metrics.summary import DEFAULT_RETRIEVAL_METRICS, summary_from_totals
from t2rag.pipeline.local import check_methods, prepare_out
from t2rag.pipeline.manifest import build_manifest, write_json
from t2rag.pipeline.records import RECORDS_DIR, metric_values, totals_from_sums
from t2rag.pipeline.steps import StageLog, sample_questions
from t2rag.retrieval.config import needs_query_vectors
from t2rag.storage import filesystem_for, join
from t2rag.system import RAGSystem

log = logging.getLogger("t2rag.progress")

INPUT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("subset", pa.string()),
        pa.field("method", pa.string()),
        pa.field("question", pa.string()),
        pa.field("query_text", pa.string()),
        pa.field("context_id", pa.string()),
        pa.field("gold_context", pa.string()),
        pa.field("reference", pa.float64()),
    ]
)


def done_keys(out: str) -> set[tuple[str, str]]:
    """(method, id) pairs that already have records; unreadable (half-written) files are removed."""
    fs, path = filesystem_for(join(out, RECORDS_DIR))
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return set()
    keys: set[tuple[str, str]] = set()
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if not info.path.endswith(".parquet"):
            continue
        try:
            table = pq.read_table(info.path, columns=["method", "id"], filesystem=fs)
        except (OSError, pa.ArrowInvalid):
            log.warning("removing unreadable record file %s (from an interrupted write)", info.path)
            fs.delete_file(info.path)
            continue
        keys.update(zip(table.column("method").to_pylist(), table.column("id").to_pylist(), strict=True))
    return keys


def plan_inputs(config: RunConfig, system: RAGSystem, done: set[tuple[str, str]]) -> dict[tuple[bool, bool], pa.Table]:
    """Input rows still to process, split by (HyDE query, generate) so each group streams through its own stages."""
    scored = system.questions.scored()
    parts: dict[tuple[bool, bool], list[pa.Table]] = {}
    for name in config.methods:
        method = get_method(name)
        if config.retrieval_only and not method.retrieves:
            continue
        for subset in system.questions.subsets:
            rows = scored.filter(pc.equal(scored.column("subset"), subset))
            sample = sample_questions(rows, config.limit, config.seed)
            base = sample if (not method.retrieves or method.query == "hyde") else rows
            sampled = set(sample.column("id").to_pylist()) if config.generates(name) else set()
            ids = base.column("id").to_pylist()
            keep = [(name, i) not in done for i in ids]
            base = base.filter(pa.array(keep))
            generate = pa.array([i in sampled for i in base.column("id").to_pylist()], pa.bool_())
            for flag in (False, True):
                chosen = base.filter(pc.equal(generate, flag)) if base.num_rows else base
                if chosen.num_rows == 0:
                    continue
                gold = chosen.column("context") if flag else pa.nulls(chosen.num_rows, pa.string())
                table = pa.table(
                    {
                        "id": chosen.column("id"),
                        "subset": chosen.column("subset"),
                        "method": pa.array([name] * chosen.num_rows, pa.string()),
                        "question": chosen.column("question"),
                        "query_text": chosen.column("question"),
                        "context_id": chosen.column("context_id"),
                        "gold_context": gold,
                        "reference": chosen.column("answer_value"),
                    },
                    schema=INPUT_SCHEMA,
                )
                parts.setdefault((method.query == "hyde", flag), []).append(table)
    # Rows of one question for different methods sit together, so a batch embeds each question once.
    return {
        key: pa.concat_tables(tables).sort_by([("subset", "ascending"), ("id", "ascending"), ("method", "ascending")])
        for key, tables in parts.items()
    }


def build_pipeline(ds, config: RunConfig, methods: set[str], hyde: bool, generate: bool):
    """Compose the stages one group of rows needs."""
    import ray

    r = config.ray

    def actors(stage, size: int, gpus: float, batch_size: int, cpus: float = 1.0):
        # Ray Data restarts a dead pool actor and retries its batch (max_restarts=-1, max_task_retries=-1).
        return ds.map_batches(
            stage,
            fn_constructor_kwargs=config_kwargs(config),
            compute=ray.data.ActorPoolStrategy(size=size),
            num_gpus=gpus,
            num_cpus=cpus,
            batch_size=batch_size,
            batch_format="pyarrow",
        )

    specs = [get_method(m) for m in methods]
    if hyde:
        ds = actors(HydePrompts, 1, 0, r.retrieve_batch_size)
        ds = generate_dataset(ds, config).map_batches(hyde_to_query, batch_format="pyarrow")
    if any(m.retriever and needs_query_vectors(m.retriever) for m in specs):
        ds = actors(EmbedQueries, r.embed_actors, r.embed_gpus, r.embed_batch_size, r.embed_cpus)
    if any(m.retrieves for m in specs):
        ds = actors(Retrieve, r.retrieve_actors, 0, r.retrieve_batch_size)
    if any(m.retriever == "reranker" for m in specs):
        ds = actors(Rerank, r.rerank_actors, r.rerank_gpus, r.rerank_batch_size)
    if generate:
        ds = actors(BuildPrompts, r.retrieve_actors, 0, r.retrieve_batch_size)
        ds = generate_dataset(ds, config).map_batches(parse_answers, batch_format="pyarrow")
    return ds.map_batches(to_records, batch_format="pyarrow")


#: Read tasks and shuffle partitions of the final reduce (a handful of (method, subset) groups).
REDUCE_BLOCKS = 4


def reduce_summary(config: RunConfig, metrics: tuple[str, ...] = DEFAULT_RETRIEVAL_METRICS) -> dict:
    """Per-method summaries from the records with Ray Data aggregations (sums per method and subset)."""
    import ray
    from ray.data.aggregate import Count, Sum
    from ray.data.context import DataContext, ShuffleStrategy

    # Task-based sort shuffle: no aggregator actors to start for a handful of groups.
    DataContext.get_current().shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    # Records are small (a few hundred bytes a row): a few read tasks beat one task per written file.
    records = ray.data.read_parquet(
        join(config.out, RECORDS_DIR), file_extensions=["parquet"], override_num_blocks=REDUCE_BLOCKS
    )
    values = records.map_batches(lambda b: metric_values(b, metrics), batch_format="pyarrow")
    aggs = [Count(), *(Sum(c) for c in ("generated", "matched", "non_numeric", "retrieved", *metrics))]
    rows = values.groupby(["method", "subset"], num_partitions=REDUCE_BLOCKS).aggregate(*aggs).take_all()
    totals = totals_from_sums(rows, metrics)
    return {m: summary_from_totals(totals[m], metrics) for m in config.methods if m in totals}


def run_ray(config: RunConfig, overwrite: bool = False) -> dict:
    """Run the evaluation on Ray and return the same summary as the single-process engine."""
    import ray

    started = time.time()
    stages = StageLog()
    prepare_out(config, overwrite)
    methods = [get_method(m) for m in config.methods]
    check_methods(config, methods)
    init_ray(config.ray)
    meter = stage_meter()
    ray.get(meter.reset.remote())
    system = RAGSystem(config, stages=stages)
    with stages.stage("build_index", 0):
        indexes = build_indexes(config, system)
    done = done_keys(config.out)
    inputs = plan_inputs(config, system, done)
    pending = sum(t.num_rows for t in inputs.values())
    log.info("evaluate: %d records to compute (%d already done)", pending, len(done))
    if pending:
        datasets = []
        for (hyde, generate), table in inputs.items():
            names = set(table.column("method").to_pylist())
            ds = dataset_from_table(table, config.ray.block_rows)
            datasets.append(build_pipeline(ds, config, names, hyde, generate))
        ds = datasets[0].union(*datasets[1:]) if len(datasets) > 1 else datasets[0]
        with stages.stage("pipeline", pending):
            ds.write_parquet(join(config.out, RECORDS_DIR))
    with stages.stage("reduce", 0):
        summary = {"methods": reduce_summary(config), "out": config.out}
    stage_lines = log_stage_lines(ray.get(meter.report.remote()))
    write_json(config.out, "summary.json", summary)
    manifest = build_manifest(config.model_dump(), config.fingerprint(), stages.entries, stages.totals(), {}, started)
    manifest["engine"] = "ray"
    manifest["ray_stages"] = stage_lines
    manifest["indexes"] = indexes
    manifest["cluster_resources"] = ray.cluster_resources()
    write_json(config.out, "manifest.json", manifest)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", default=None, help="override the config's output location")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = load_config(args.config, {"out": args.out} if args.out else None)
    print(json.dumps(run_ray(config, overwrite=args.overwrite)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
