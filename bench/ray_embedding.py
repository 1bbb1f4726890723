"""Passage embedding throughput: the Ray Data actor pool of ray_jobs.build_index versus plain
SentenceTransformer.encode in one process, on the same contexts, measured in one run.

Usage: python bench/ray_embedding.py [--batch-size 64] [--repeats 2]
The Ray figure is end to end (dataset creation, actor start, model load in the actor, transfer of the vectors
back); the steady-state figure subtracts the time to the first batch. Compare the ratio, not absolute speeds.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import ray

    from ray_jobs.build_index import embed_corpus
    from ray_jobs.local_cluster import local_cpus, start_local_cluster
    from t2rag.config import load_config
    from t2rag.data import Corpus, build_corpora, load_questions
    from t2rag.retrieval import Embedder, EmbedderConfig

    questions = load_questions(None)
    parts = list(build_corpora(questions).values())
    corpus = Corpus(
        "all",
        tuple(c for p in parts for c in p.context_ids),
        tuple(s for p in parts for s in p.subsets),
        tuple(t for p in parts for t in p.texts),
    )
    texts = list(corpus.texts)
    cores = os.cpu_count() or 1
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
        start = time.perf_counter()
        distributed = embed_corpus(config, corpus)
        ray_runs.append(time.perf_counter() - start)
    same = float(np.max(np.abs(plain - distributed)))
    p, r = min(plain_runs), min(ray_runs)
    print(f"{len(texts)} contexts, batch {args.batch_size}, {cores} cores, all-MiniLM-L6-v2 (max 256 tokens)")
    print(f"plain encode : {len(texts) / p:7.1f} passages/s ({p:.1f} s)")
    print(f"ray pipeline : {len(texts) / r:7.1f} passages/s ({r:.1f} s, 1 actor with {cores} CPUs)")
    print(f"ratio ray/plain: {p / r:.2f}   (max |difference| of vectors {same:.1e})")


if __name__ == "__main__":
    main()
