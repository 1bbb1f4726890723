"""BM25 scoring throughput: t2rag's sparse-matrix BM25 against rank_bm25's get_scores, on the bundled sample.

Both score every question of a subset against that subset's corpus; the figure is the ratio measured in one run,
plus a check that both give identical top-10 rankings. Usage: python bench/bm25.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from rank_bm25 import BM25Okapi

from t2rag.data import build_corpora, load_questions
from t2rag.retrieval.lexical.bm25_matrix import BM25Matrix
from t2rag.retrieval.ranking import top_n
from t2rag.tokenize import whitespace_tokenize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    questions = load_questions(args.data)
    corpora = build_corpora(questions)
    total_ours = total_ref = 0.0
    total_q = 0
    header = ("subset", "docs", "queries", "build s", "ours ms", "rank_bm25 s", "speed-up")
    print("{:10} {:>6} {:>8} {:>8} {:>8} {:>12} {:>9} top-10".format(*header))
    for subset, corpus in corpora.items():
        texts = questions.subset(subset).table.column("question").to_pylist()
        start = time.perf_counter()
        matrix = BM25Matrix(corpus.texts)
        build = time.perf_counter() - start
        matrix.scores(texts)  # warm-up
        runs = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            ours = matrix.scores(texts)
            runs.append(time.perf_counter() - start)
        ours_s = statistics.median(runs)

        reference = BM25Okapi([whitespace_tokenize(t) for t in corpus.texts])
        start = time.perf_counter()
        ref = np.array([reference.get_scores(whitespace_tokenize(q)) for q in texts])
        ref_s = time.perf_counter() - start

        same = np.array_equal(top_n(ours, 10)[0], top_n(ref, 10)[0])
        rel = float(np.max(np.abs(ours - ref) / np.maximum(np.abs(ref), 1e-300)))
        print(
            f"{subset:10} {len(corpus):6d} {len(texts):8d} {build:8.3f} {ours_s * 1e3:8.1f} {ref_s:12.2f} "
            f"{ref_s / ours_s:8.0f}x {'identical' if same else 'DIFFERENT'} (max rel diff {rel:.1e})"
        )
        total_ours += ours_s
        total_ref += ref_s
        total_q += len(texts)
    print(
        f"all: {total_q} queries, ours {total_ours * 1e3:.1f} ms ({total_q / total_ours:,.0f} q/s), "
        f"rank_bm25 {total_ref:.2f} s ({total_q / total_ref:,.0f} q/s), speed-up {total_ref / total_ours:.0f}x"
    )


if __name__ == "__main__":
    main()
