"""Retrieval-only evaluation of the retrieval methods on the bundled sample: ray_jobs.evaluate versus the
single-process runner, in one run, with where the time goes.

Usage: python bench/ray_vs_local.py [--methods bm25,base,hybrid_bm25,hybrid_rrf]
A first untimed pass builds the LanceDB indexes so both timed runs reuse them. Each timed run loads the embedding
model itself, as a user's run does: the single-process run in a fresh process (the untimed pass left the model
loaded in this one), the Ray run in its actors. The local cluster starts before the Ray timer.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def time_local(fields: dict) -> tuple[float, dict, dict[str, float]]:
    """Seconds, summary and stage totals of a single-process run of the config in this (fresh) process."""
    from t2rag.config import load_config
    from t2rag.pipeline.local import LocalRunner

    runner = LocalRunner(load_config(None, fields))
    start = time.perf_counter()
    summary = runner.run()
    return time.perf_counter() - start, summary, runner.log.totals()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--methods", default="bm25,base,hybrid_bm25,hybrid_rrf")
    parser.add_argument("--embed-batch-size", type=int, default=None, help="rows per query-embedding call on Ray")
    parser.add_argument("--embed-cpus", type=int, default=None, help="CPUs (threads) of that actor")
    parser.add_argument("--retrieve-block-rows", type=int, default=None, help="rows per input block on Ray")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    import ray

    from ray_jobs.evaluate import run_ray
    from ray_jobs.local_cluster import local_cpus, start_local_cluster
    from t2rag.config import load_config
    from t2rag.pipeline.local import LocalRunner

    methods = args.methods.split(",")
    work = tempfile.mkdtemp()
    ray_fields = {
        "embed_cpus": args.embed_cpus,
        "embed_batch_size": args.embed_batch_size,
        "retrieve_block_rows": args.retrieve_block_rows,
    }
    ray_fields = {k: v for k, v in ray_fields.items() if v is not None}  # None: the product's defaults
    base = {"methods": methods, "retrieval_only": True, "ray": ray_fields}
    LocalRunner(load_config(None, {**base, "out": f"{work}/warm"})).run()  # builds the indexes

    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as fresh:
        local_s, local, local_totals = fresh.submit(time_local, {**base, "out": f"{work}/local"}).result()

    start_local_cluster(num_cpus=local_cpus(), object_store_memory=400 * 2**20)
    ray.data.DataContext.get_current().enable_progress_bars = False
    start = time.perf_counter()
    distributed = run_ray(load_config(None, {**base, "runner": "ray", "out": f"{work}/ray"}))
    ray_s = time.perf_counter() - start
    import json
    from pathlib import Path

    manifest = json.loads(Path(f"{work}/ray/manifest.json").read_text())

    print(f"methods: {', '.join(methods)}; {local['methods'][methods[0]]['weighted']['questions']} questions each")
    print(f"single process: {local_s:6.1f} s")
    for stage, seconds in local_totals.items():
        print(f"    {stage:14} {seconds:6.1f} s")
    print(f"ray_jobs       : {ray_s:6.1f} s   ratio ray/local time {ray_s / local_s:.2f}")
    for stage, seconds in manifest["stage_totals_s"].items():
        print(f"    {stage:14} {seconds:6.1f} s (driver wall time)")
    for line in manifest["ray_stages"]:
        stage, rows, busy, active = line["stage"], line["rows"], line["busy_s"], line["active_s"]
        print(f"    worker stage {stage:14} rows {rows:6d} busy {busy:6.1f} s active {active:6.1f} s")
    print(f"identical summaries: {distributed['methods'] == local['methods']}")


if __name__ == "__main__":
    main()
