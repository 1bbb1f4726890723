"""Try one more feature on bm25_focus's candidates against the dev growth measure, before building it into the method.

    python bench/candidate_feature.py --window 24 --weights 0,0.1,0.2,0.3,0.4,0.6

For each subset, every question is searched by bm25_focus (its shipped weights) against the 50% share of its
subset's contexts (10 seeds, the growth measure's corpora: `ray_jobs.ablate_corpus_size.cell_corpus`) and against
the whole dev corpus; its 50 candidates (the second stage's) are reranked by the fused score plus `weight` times the
feature, and Recall@1 and MRR@3 are printed per weight with the fall from 50% to 100%. Weight 0 is bm25_focus
itself (the figures of `bench/retrieval_growth.py --methods bm25_focus --shares 0.5,1.0`). Pooled over seeds and
subsets, question-weighted.

The feature here is proximity: the idf mass (over the cell's corpus) of the question's content words that the
candidate holds within some `--window` consecutive content words, over the question's whole mass. Nothing is
fitted; only the question's text is read on the question side.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter

import numpy as np

from ray_jobs.ablate_corpus_size import cell_corpus
from t2rag.config import load_config
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval import QueryBlock, build_retriever
from t2rag.retrieval.page_evidence.words import phrase_words

CANDIDATES = 50


def window_mass(asked: set[str], words: list[str], idf: dict[str, float], window: int) -> float:
    """The largest idf mass of distinct asked words inside `window` consecutive words, over all asked words' mass."""
    total = sum(idf.get(w, 0.0) for w in asked)
    if total == 0:
        return 0.0
    hits = [(i, w) for i, w in enumerate(words) if w in asked]
    inside: Counter = Counter()
    best = mass = 0.0
    start = 0
    for position, word in hits:
        if inside[word] == 0:
            mass += idf.get(word, 0.0)
        inside[word] += 1
        while position - hits[start][0] >= window:
            left = hits[start][1]
            inside[left] -= 1
            if inside[left] == 0:
                mass -= idf.get(left, 0.0)
            start += 1
        best = max(best, mass)
    return best / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=int, default=24)
    parser.add_argument("--weights", default="0,0.1,0.2,0.3,0.4,0.6")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    config = load_config(None, {"methods": ["bm25_focus"], "retrieval_only": True})
    resources = Resources(config)
    words_of: dict[str, list[str]] = {}
    tally: dict[tuple[float, float], np.ndarray] = {}  # (share, weight) -> [at rank 1, MRR@3 sum, questions]
    for subset in resources.questions.subsets:
        own = resources.corpus(subset)
        rows = resources.questions.subset(subset).scored()
        questions = np.asarray(rows.column("question").to_pylist(), dtype=object)
        gold = np.asarray(rows.column("context_id").to_pylist(), dtype=object)
        asked = [set(phrase_words(q)) for q in questions]
        for share, seeds in ((0.5, range(args.seeds)), (1.0, range(1))):
            for seed in seeds:
                corpus, _, _ = cell_corpus(own, max(1, round(share * len(own))), seed, None)
                for text in corpus.texts:
                    words_of.setdefault(text, phrase_words(text))
                df = Counter(w for text in corpus.texts for w in set(words_of[text]))
                idf = {w: math.log(1 + len(corpus) / n) for w, n in df.items()}
                retriever = build_retriever(get_method("bm25_focus").retriever, config.retrieval)
                retriever.index(corpus)
                searched = np.nonzero(np.isin(gold, np.asarray(corpus.context_ids)))[0]
                hits = retriever.search(QueryBlock(questions[searched].tolist(), None), 3, CANDIDATES)
                for row, (q, ids) in enumerate(zip(searched, hits.context_ids(corpus), strict=True)):
                    feature = np.array([
                        window_mass(asked[q], words_of[corpus.texts[corpus.positions[c]]], idf, args.window)
                        if c is not None else 0.0
                        for c in ids
                    ])  # fmt: skip
                    for weight in weights:
                        order = np.argsort(-(hits.scores[row] + weight * feature), kind="stable")
                        ranked = [ids[o] for o in order]
                        rank = ranked.index(gold[q]) + 1 if gold[q] in ranked else 0
                        t = tally.setdefault((share, weight), np.zeros(3))
                        t += (rank == 1, 1 / rank if 0 < rank <= 3 else 0.0, 1)
    print(f"bm25_focus + weight x proximity (window {args.window} words), {args.seeds} seeds at 50%")
    print("| weight | R@1 50% | R@1 100% | R@1 fall | MRR@3 50% | MRR@3 100% | MRR@3 fall |")
    print("|--:|--:|--:|--:|--:|--:|--:|")
    for weight in weights:
        half, whole = tally[(0.5, weight)], tally[(1.0, weight)]
        r1, r2 = 100 * half[0] / half[2], 100 * whole[0] / whole[2]
        m1, m2 = 100 * half[1] / half[2], 100 * whole[1] / whole[2]
        print(f"| {weight:g} | {r1:.2f} | {r2:.2f} | {r1 - r2:.2f} | {m1:.2f} | {m2:.2f} | {m1 - m2:.2f} |")


if __name__ == "__main__":
    main()
