"""BM25 at corpus scale: t2rag's blockwise exact BM25 against bm25s, side by side in one run, on synthetic corpora
of real context tokens resampled (timing only: the documents are not real, so no quality figure comes from them).

    python bench/bm25_scale.py                          # 10K and 100K documents, 2,000 real questions
    python bench/bm25_scale.py --sizes 1000000 --questions 2000 --threads 2
    python bench/bm25_scale.py --json

The documents are `t2rag.data.distractors.synthetic_contexts` (lengths and tokens of the real contexts resampled,
seeded), so posting-list lengths look like the real corpus's. Queries are the bundled real questions.
Reported per size: index build seconds and the index's bytes (t2rag), queries/s of both at k=10, their ratio, and
whether t2rag's rankings equal rank_bm25 semantics (checked against the dense rank_bm25 formula on `--check`
queries; rank_bm25 itself would take hours at these sizes). bm25s runs method="robertson" (the comparison the
issue was filed with); it differs from rank_bm25 in idf, so it is a speed reference and not a parity one.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np

from t2rag.data import load_questions
from t2rag.data.distractors import synthetic_contexts
from t2rag.retrieval.lexical.bm25_matrix import BM25Matrix
from t2rag.retrieval.ranking import top_n
from t2rag.tokenize import whitespace_tokenize


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reference_top(matrix: BM25Matrix, query: str, k: int) -> np.ndarray:
    """rank_bm25's ranking for one query, written out densely (its get_scores loop over query tokens)."""
    scores = np.zeros(matrix.n_docs)
    for term in whitespace_tokenize(query):
        if term in matrix.vocab:
            scores += matrix.term_weights(matrix.vocab[term])
    return top_n(scores[None, :], k)[0][0]


def measure(size: int, questions: list[str], args) -> dict:
    texts = list(synthetic_contexts(size).texts)
    out: dict = {"documents": size, "questions": len(questions), "synthetic": True}
    before = peak_rss_mb()
    start = time.perf_counter()
    matrix = BM25Matrix(texts)
    out["t2rag_build_s"] = round(time.perf_counter() - start, 1)
    out["t2rag_index_mb"] = round(matrix.index_bytes / 2**20, 1)
    out["t2rag_dense_terms"] = len(matrix.dense)
    matrix.top_k(questions[:64], 10, threads=args.threads)  # warm-up
    start = time.perf_counter()
    ours, _ = matrix.top_k(questions, 10, threads=args.threads)
    out["t2rag_qps"] = round(len(questions) / (time.perf_counter() - start), 1)
    out["t2rag_peak_rss_growth_mb"] = round(peak_rss_mb() - before, 1)
    checked = list(range(0, len(questions), max(1, len(questions) // args.check)))[: args.check]
    out["rank_bm25_semantics_checked"] = len(checked)
    out["rank_bm25_semantics_equal"] = all(
        np.array_equal(ours[i], reference_top(matrix, questions[i], 10)) for i in checked
    )
    del matrix
    if size > args.bm25s_max:
        out["bm25s"] = f"not run above {args.bm25s_max:,} documents (its token-id lists do not fit in memory here)"
        return out

    import bm25s

    start = time.perf_counter()
    retriever = bm25s.BM25(method="robertson")
    retriever.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
    out["bm25s_build_s"] = round(time.perf_counter() - start, 1)
    tokenized = bm25s.tokenize(questions[:64], stopwords=None, show_progress=False)
    retriever.retrieve(tokenized, k=10, show_progress=False, n_threads=args.threads)  # warm-up
    start = time.perf_counter()
    tokenized = bm25s.tokenize(questions, stopwords=None, show_progress=False)
    retriever.retrieve(tokenized, k=10, show_progress=False, n_threads=args.threads)
    out["bm25s_qps"] = round(len(questions) / (time.perf_counter() - start), 1)
    out["t2rag_over_bm25s"] = round(out["t2rag_qps"] / out["bm25s_qps"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated document counts")
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2, help="threads for both libraries")
    parser.add_argument("--check", type=int, default=20, help="queries checked against rank_bm25 semantics")
    parser.add_argument("--bm25s-max", type=int, default=300_000, help="largest corpus bm25s is run on")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    asked = load_questions(None).table.column("question").to_pylist()
    questions = [asked[i % len(asked)] for i in range(args.questions)]
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows.append(measure(size, questions, args))
        if not args.json:
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| documents | build s (t2rag / bm25s) | index MB | t2rag q/s | bm25s q/s | ratio | rank_bm25 rankings |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "bm25s_qps" not in r:
            r.update(bm25s_build_s="-", bm25s_qps="-", t2rag_over_bm25s="-")
        same = (
            f"{'equal' if r['rank_bm25_semantics_equal'] else 'DIFFERENT'} ({r['rank_bm25_semantics_checked']} checked)"
        )
        print(
            f"| {r['documents']:,} | {r['t2rag_build_s']} / {r['bm25s_build_s']} | {r['t2rag_index_mb']} "
            f"| {r['t2rag_qps']} | {r['bm25s_qps']} | {r['t2rag_over_bm25s']} | {same} |"
        )


if __name__ == "__main__":
    main()
