"""Sharded fused retrieval against the whole index, at a size one process still holds: rankings, scores and the
certificate (`t2rag.retrieval.fusion.sharded`).

    python bench/fused_shards_exact.py [--method bm25_focus] [--size 100000] [--shards 4] [--subsets FinQA,TAT-DQA]

Each subset's questions are searched against its own contexts followed by synthetic ones (the corpus-size
ablation's cell of that size, seed 0): once by the unsharded retriever, once in shards, each indexed alone with the
corpus's statistics, then merged. Printed per subset: questions whose top 10 (positions and scores) equal the
unsharded search's, questions certified, and seconds for each way.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ray_jobs.ablate_corpus_size import cell_part
from t2rag.config import load_config
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval import build_retriever
from t2rag.retrieval.base import shard_corpus
from t2rag.retrieval.fusion.sharded import CorpusFacts, ShardFacts, index_shard, merge_candidates, shard_candidates
from t2rag.retrieval.shards import shard_ranges


def compare(method: str, subset: str, size: int, shards: int) -> dict:
    config = load_config(None, {"methods": [method], "retrieval_only": True})
    resources = Resources(config)
    corpus = cell_part(resources.corpus(subset), 0, range(0, size))
    questions = resources.questions.subset(subset).scored().column("question").to_pylist()
    make = lambda: build_retriever(get_method(method).retriever, config.retrieval)  # noqa: E731
    start = time.perf_counter()
    whole = make()
    whole.index(corpus)
    expected = whole.search(questions, config.retrieval.k)
    whole_s = time.perf_counter() - start
    del whole
    start = time.perf_counter()
    ranges = shard_ranges(size, shards)
    facts = CorpusFacts.merge([ShardFacts.of(make(), shard_corpus(corpus, r)) for r in ranges])
    parts = []
    for r in ranges:
        retriever = make()
        index_shard(retriever, shard_corpus(corpus, r), r, facts)
        parts.append(shard_candidates(retriever, questions, 2 * retriever.candidates, r.start))
        del retriever
    hits, certified = merge_candidates(make(), parts, config.retrieval.k, contained=facts.contained)
    sharded_s = time.perf_counter() - start
    same = (hits.indices == expected.indices).all(axis=1) & np.isclose(
        hits.scores, expected.scores, rtol=0, atol=0, equal_nan=True
    ).all(axis=1)
    return {
        "subset": subset,
        "documents": size,
        "shards": shards,
        "questions": len(questions),
        "identical": int(same.sum()),
        "certified": int(certified.sum()),
        "whole_s": round(whole_s, 1),
        "sharded_s": round(sharded_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="bm25_focus")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--subsets", default="FinQA,TAT-DQA")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [compare(args.method, s, args.size, args.shards) for s in args.subsets.split(",")]
    if args.json:
        print(json.dumps(rows))
        return
    print("| subset | documents | shards | questions | identical top 10 | certified | whole s | sharded s |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['subset']} | {r['documents']:,} | {r['shards']} | {r['questions']} | {r['identical']} | "
              f"{r['certified']} | {r['whole_s']} | {r['sharded_s']} |")  # fmt: skip


if __name__ == "__main__":
    main()
