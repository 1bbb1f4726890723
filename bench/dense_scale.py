"""Dense retrieval at corpus scale: flat (exact) LanceDB search against its ANN index, per query, as the corpus
grows, with the ANN's recall@10 against the flat scan on the real questions. Timing only: the corpora are synthetic
(`t2rag.data.distractors.synthetic_contexts`) and the vectors come from the deterministic hashing embedder, so no
quality figure comes from them.

    python bench/dense_scale.py                                 # 10K and 100K documents, 1,000 real questions
    python bench/dense_scale.py --sizes 1000000 --json

Reported per size: index write and ANN build seconds, queries/s of both searches at k=10, the cost per query
relative to the smallest size, and ANN recall@10 (the share of the flat top 10 the ANN search finds).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import numpy as np

from t2rag.data import load_questions
from t2rag.data.distractors import synthetic_contexts
from t2rag.retrieval.dense.embedder import EmbedderConfig
from t2rag.retrieval.dense.hashing_embedder import HASHING_MODEL, HashingEmbedder
from t2rag.retrieval.dense.vector_store import AnnConfig, VectorStore


def measure(size: int, query_vectors: np.ndarray, embedder: HashingEmbedder, root: str, args) -> dict:
    corpus = synthetic_contexts(size)
    start = time.perf_counter()
    vectors = embedder.embed_passages(corpus.texts)
    out: dict = {"documents": size, "questions": len(query_vectors), "synthetic": True}
    out["embed_s"] = round(time.perf_counter() - start, 1)
    store = VectorStore(root, AnnConfig(above=1, nprobes=args.nprobes, refine_factor=args.refine, probes=10))
    start = time.perf_counter()
    flat = VectorStore(root).write(f"flat-{size}", corpus, vectors)
    out["write_s"] = round(time.perf_counter() - start, 1)
    start = time.perf_counter()
    ann = store.write(f"ann-{size}", corpus, vectors)  # writes again, then builds the index
    out["ann_build_s"] = ann.ann_info["ann_build_s"]
    del vectors
    for name, table in (("flat", flat), ("ann", ann)):
        table.search(query_vectors[:32], 10)  # warm-up
        start = time.perf_counter()
        found, _ = table.search(query_vectors, 10)
        out[f"{name}_qps"] = round(len(query_vectors) / (time.perf_counter() - start), 1)
        out[f"{name}_top"] = found
    exact, approximate = out.pop("flat_top"), out.pop("ann_top")
    out["ann_recall_at_10"] = round(
        float(np.mean([len(set(a.tolist()) & set(e.tolist())) / 10 for a, e in zip(approximate, exact, strict=True)])),
        4,
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--nprobes", type=int, default=32)
    parser.add_argument("--refine", type=int, default=AnnConfig().refine_factor)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = HashingEmbedder(EmbedderConfig(model=HASHING_MODEL))
    asked = load_questions(None).table.column("question").to_pylist()
    query_vectors = embedder.embed_queries([asked[i % len(asked)] for i in range(args.questions)])
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for size in (int(s) for s in args.sizes.split(",")):
            rows.append(measure(size, query_vectors, embedder, root, args))
            if not args.json:
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    first = rows[0]
    for r in rows:
        growth = r["documents"] / first["documents"]
        r["flat_cost_growth"] = round(first["flat_qps"] / r["flat_qps"] / growth, 3)
        r["ann_cost_growth"] = round(first["ann_qps"] / r["ann_qps"] / growth, 3)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        "| documents | write s | ANN build s | flat q/s | ANN q/s | ANN recall@10 | cost per query / size (flat, ANN) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['documents']:,} | {r['write_s']} | {r['ann_build_s']} | {r['flat_qps']} | {r['ann_qps']} "
            f"| {r['ann_recall_at_10']} | {r['flat_cost_growth']}, {r['ann_cost_growth']} |"
        )


if __name__ == "__main__":
    main()
