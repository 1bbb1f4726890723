"""Retrieval cost per question of each method against plain BM25, on the same corpus, in one process.

    python bench/retrieval_cost.py                                   # the bundled dev sample, all-MiniLM-L6-v2
    python bench/retrieval_cost.py --distractors 10000 --embedder hashing   # + synthetic contexts (timing only)

Every retriever is indexed first (reusing cached tables; index time is not a per-question cost), then all of a
subset's questions are searched as one block, twice, the faster run counting. Reported per method: milliseconds
per question for embedding the questions (dense methods; on a GPU actor pool this is what a cluster pays per
question), for the search itself, and both together, each as a ratio to BM25's. `--embedder hashing` replaces the
model by the deterministic hashing embedder, for corpora too large to embed on a CPU: its figures say what the
search costs, not what a real model's embedding would.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from t2rag.data import build_corpora, load_questions
from t2rag.data.distractors import extend, synthetic_contexts
from t2rag.methods import get_method
from t2rag.retrieval import QueryBlock, RetrievalConfig, build_retriever
from t2rag.retrieval.embedder import EmbedderConfig, make_embedder

METHODS = "bm25,bm25_numeric,bm25_meta,bm25_page,chunked,hybrid_chunked,hybrid_meta"


def best_of(runs: int, fn) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--distractors", type=int, default=0, help="synthetic contexts added to every corpus")
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2")
    parser.add_argument("--index-uri", default=None, help="LanceDB location (default: the t2rag cache)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    methods = args.methods.split(",")
    questions = load_questions(args.data)
    corpora = build_corpora(questions)
    if args.distractors:
        extra = synthetic_contexts(args.distractors)
        corpora = {name: extend(c, extra) for name, c in corpora.items()}
    index_uri = args.index_uri or (tempfile.mkdtemp() if args.distractors else None)
    config = RetrievalConfig(embedder=EmbedderConfig(model=args.embedder), index_uri=index_uri)
    embedder = make_embedder(config.embedder)
    rows: dict[str, dict] = {m: {"embed_s": 0.0, "search_s": 0.0} for m in methods}
    n_questions = 0
    for subset, corpus in corpora.items():
        texts = questions.subset(subset).scored().column("question").to_pylist()
        n_questions += len(texts)
        vectors, seconds = None, 0.0
        for method in methods:
            retriever = build_retriever(get_method(method).retriever, config)
            retriever.index(corpus)
            block = QueryBlock(texts)
            if retriever.needs_query_vectors:
                if vectors is None:
                    embedder.embed_queries(texts[:32])  # warm-up
                    seconds, vectors = best_of(2, lambda t=texts: embedder.embed_queries(t))
                rows[method]["embed_s"] += seconds
                block.vectors = vectors
            retriever.search(QueryBlock(texts[:8], None if vectors is None else vectors[:8]), 3)  # warm-up
            rows[method]["search_s"] += best_of(2, lambda r=retriever, b=block: r.search(b, 3))[0]
    base = rows.get("bm25")
    out = {
        "questions": n_questions,
        "documents": {s: len(c) for s, c in corpora.items()},
        "embedder": args.embedder,
        "methods": {},
    }
    for method, r in rows.items():
        total = r["embed_s"] + r["search_s"]
        entry = {
            "embed_ms": round(1000 * r["embed_s"] / n_questions, 3),
            "search_ms": round(1000 * r["search_s"] / n_questions, 3),
            "total_ms": round(1000 * total / n_questions, 3),
        }
        if base:
            entry["search_vs_bm25"] = round(r["search_s"] / base["search_s"], 2)
            entry["total_vs_bm25"] = round(total / (base["embed_s"] + base["search_s"]), 2)
        out["methods"][method] = entry
    if args.json:
        print(json.dumps(out))
        return
    print(f"{n_questions} questions, documents per subset {out['documents']}, embedder {args.embedder}")
    print(f"{'method':16} {'embed ms/q':>11} {'search ms/q':>12} {'total ms/q':>11} {'search/bm25':>12} total/bm25")
    for method, e in out["methods"].items():
        print(
            f"{method:16} {e['embed_ms']:11.3f} {e['search_ms']:12.3f} {e['total_ms']:11.3f} "
            f"{e.get('search_vs_bm25', float('nan')):12.2f} {e.get('total_vs_bm25', float('nan')):11.2f}"
        )


if __name__ == "__main__":
    main()
