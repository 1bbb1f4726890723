"""Passage embedding throughput: the Ray Data actor pool of ray_jobs.build_index versus plain
SentenceTransformer.encode in one process, on the same contexts, measured in one run.

Usage: python bench/ray_embedding.py [--batch-size 64] [--repeats 2] [--contexts N]
The Ray figure is end to end (dataset creation, actor start, model load in the actor, transfer of the vectors
back) through the placement ray_jobs.build_index uses. The steady-state figure is the rate between the first batch
back (actor start and model load come with it) and the last but one: Ray Data hands a batch back once the actor has
finished the next one, so the last two arrive together. Plain encode is timed twice: with the model already loaded
in this process, and in a fresh process that imports sentence-transformers and loads the model first, as a
single-process index build does (the Ray actor pays both too). Compare the ratios, not absolute speeds.
`--contexts N` embeds the bundled contexts repeated to N (default: each once, 573), to see how the actor's fixed
start-up weighs on a larger corpus.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def embed_on_ray(config, texts: list[str]) -> tuple[np.ndarray, float, list[tuple[float, int]]]:
    """Vectors of the texts from the embedding actor pool, the seconds it took, and (seconds, rows) of each batch
    as it came back."""
    import pyarrow as pa

    from ray_jobs.placement import place
    from ray_jobs.table_blocks import dataset_from_table
    from t2rag.stages.embed import vectors_of

    start = time.perf_counter()
    rows = pa.table({"doc": np.arange(len(texts)), "text": texts})
    ds = place(dataset_from_table(rows, config.ray.embed_batch_size), ("embed_passages",), config)
    out, arrivals = np.zeros((0, 0), dtype=np.float32), []
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        arrivals.append((time.perf_counter() - start, batch.num_rows))
        vectors = vectors_of(batch.column("vector"))
        if not out.size:
            out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        out[batch.column("doc").to_numpy()] = vectors
    return out, time.perf_counter() - start, arrivals


def steady_rate(arrivals: list[tuple[float, int]]) -> float | None:
    """Rows per second between the first batch back and the last but one; None with fewer than three batches."""
    if len(arrivals) < 3:
        return None
    (first_s, _), (last_s, _) = arrivals[0], arrivals[-2]
    return sum(rows for _, rows in arrivals[1:-1]) / (last_s - first_s)


def encode_fresh(texts: list[str], batch_size: int) -> np.ndarray:
    """Vectors of the texts from an embedder built in this process (run in a new one)."""
    from t2rag.retrieval import Embedder, EmbedderConfig

    return Embedder(EmbedderConfig(batch_size=batch_size)).embed_passages(texts)


def time_in_fresh_process(texts: list[str], batch_size: int) -> float:
    """Seconds from starting a new Python process to having the vectors back from it."""
    spawn = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as fresh:
        fresh.submit(encode_fresh, texts, batch_size).result()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--contexts", type=int, default=None, help="the bundled contexts repeated to this many")
    args = parser.parse_args()

    import ray

    from ray_jobs.local_cluster import local_cpus, start_local_cluster
    from t2rag.config import load_config
    from t2rag.data import build_corpora, load_questions
    from t2rag.retrieval import Embedder, EmbedderConfig

    texts = [text for corpus in build_corpora(load_questions(None)).values() for text in corpus.texts]
    if args.contexts:
        texts = [texts[i % len(texts)] for i in range(args.contexts)]
    cores = os.cpu_count() or 1
    fresh_s = min(time_in_fresh_process(texts, args.batch_size) for _ in range(args.repeats))
    embedder = Embedder(EmbedderConfig(batch_size=args.batch_size))
    embedder.embed_passages(texts[:8])  # warm-up

    start_local_cluster(num_cpus=local_cpus(), object_store_memory=400 * 2**20)  # as ray_jobs starts one
    ray.data.DataContext.get_current().enable_progress_bars = False
    config = load_config(None, {"ray": {"embed_batch_size": args.batch_size, "embed_cpus": cores}})

    plain_runs, ray_runs = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        plain = embedder.embed_passages(texts)
        plain_runs.append(time.perf_counter() - start)
        distributed, seconds, arrivals = embed_on_ray(config, texts)
        ray_runs.append((seconds, arrivals))
    same = float(np.max(np.abs(plain - distributed)))
    n, p = len(texts), min(plain_runs)
    r, arrivals = min(ray_runs)
    first_s, first_rows = arrivals[0]
    print(f"{n} contexts, batch {args.batch_size}, {cores} cores, all-MiniLM-L6-v2 (max 256 tokens)")
    print(f"plain encode : {n / p:7.1f} passages/s ({p:.1f} s)")
    print(f"  in a fresh process, imports and model load included: {n / fresh_s:7.1f} passages/s ({fresh_s:.1f} s)")
    print(f"ray pipeline : {n / r:7.1f} passages/s ({r:.1f} s, 1 actor with {cores} CPUs)")
    print(f"  first batch after {first_s:.1f} s ({first_rows} rows; actor start and model load)")
    steady = steady_rate(arrivals)
    if steady is not None:
        print(f"  steady     : {steady:7.1f} passages/s (first batch back to the last but one)")
        print(f"ratio ray/plain: {p / r:.2f} end to end, {steady * p / n:.2f} steady")
    else:
        print(f"ratio ray/plain: {p / r:.2f} end to end (no steady state: use a smaller --batch-size)")
    print(f"ratio ray/plain in a fresh process: {fresh_s / r:.2f} end to end")
    print(f"max |difference| of vectors {same:.1e}")


if __name__ == "__main__":  # the guard also keeps spawned processes from running the bench
    main()
