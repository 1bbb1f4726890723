"""Try one more feature as a reranker of a retrieval run's top 10, before building it into a method.

    t2rag eval --config configs/best_retrieval.yaml --out runs/dev
    t2rag eval --config DOUBLED.yaml --out runs/doubled   # the same, with data: {distractors: SOURCE}
    python bench/rerank_feature.py runs/dev runs/doubled --feature dense --distractors SOURCE

Each question's ten results (the run's records of `--method`) are reranked by their fused score plus `weight` times
the feature, and MRR@3 and Recall@1 are printed per run and weight; weight 0 is the run itself. Pick a weight on the
dev-only run; the doubled run then shows what it does where a report has more pages. Nothing is fitted here, and the
question side reads only the question's text.

Features:
- `dense`: the best cosine between the question and the page's chunks (the repository's chunking and embedder,
  all-MiniLM-L6-v2 unless `--embedder`); about 14 minutes on 2 cores with the dev + test corpus.
- `quarter`: the share of the (quarter, year) pairs the question names ("Q4 2019", "the fourth quarter of 2019"; a
  quarter without a year takes each year the question names) that the page names as a quarter and year.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc

from t2rag.data import Corpus, build_corpora, load_questions
from t2rag.data.distractors import extend, load_distractors
from t2rag.retrieval.years import years_named
from t2rag.run_folder.files import read_records

if TYPE_CHECKING:
    from t2rag.retrieval.dense.embedder import Embedder

ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3, "4th": 4}
QUARTER = re.compile(
    r"\b(?:q([1-4])|(first|second|third|fourth|1st|2nd|3rd|4th)[ -]quarter)\b"
    r"(?:\s+(?:of\s+)?(?:fiscal\s+)?(?:year\s+)?((?:19|20)\d\d)\b)?",
    re.IGNORECASE,
)


def quarters(text: str, years_for_bare: bool) -> set[tuple[int, int]]:
    """The (quarter, year) pairs a text names; a quarter named without a year takes each of the text's years when
    `years_for_bare` (a question), and is left out otherwise (a page)."""
    years = years_named(text) if years_for_bare else frozenset()
    pairs: set[tuple[int, int]] = set()
    for digit, word, year in QUARTER.findall(text):
        quarter = int(digit) if digit else ORDINALS[word.lower()]
        if year:
            pairs.add((quarter, int(year)))
        else:
            pairs |= {(quarter, y) for y in years}
    return pairs


def quarter_feature(corpus: Corpus) -> Callable[[str, list[str]], np.ndarray]:
    pages: dict[str, set[tuple[int, int]]] = {}

    def score(question: str, ids: list[str]) -> np.ndarray:
        asked = quarters(question, True)
        if not asked:
            return np.zeros(len(ids))
        for i in ids:
            if i not in pages:
                pages[i] = quarters(corpus.texts[corpus.positions[i]], False)
        return np.array([len(asked & pages[i]) / len(asked) for i in ids])

    return score


def dense_feature(corpus: Corpus, embedder: Embedder, questions: list[str]) -> Callable[[str, list[str]], np.ndarray]:
    from t2rag.retrieval.dense.chunked import chunk_corpus
    from t2rag.retrieval.dense.chunking import ChunkingConfig

    chunks, doc = chunk_corpus(corpus, embedder.config, ChunkingConfig())
    vectors = embedder.embed_passages(chunks.texts)
    order = np.argsort(doc, kind="stable")
    starts = np.searchsorted(doc[order], np.arange(len(corpus) + 1))
    asked = dict(zip(questions, embedder.embed_queries(questions), strict=True))

    def score(question: str, ids: list[str]) -> np.ndarray:
        q = asked[question]
        best = []
        for i in ids:
            p = corpus.positions[i]
            best.append(float((vectors[order[starts[p] : starts[p + 1]]] @ q).max()))
        return np.array(best)

    return score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--feature", choices=("dense", "quarter"), required=True)
    parser.add_argument("--method", default="bm25_focus")
    parser.add_argument("--distractors", default=None, help="the doubled run's data.distractors source")
    parser.add_argument("--weights", default="0,0.1,0.2,0.3,0.5,0.8,1.2,2")
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2")
    args = parser.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    questions = load_questions(None)
    corpora = build_corpora(questions)
    if args.distractors:
        distractors = load_distractors(args.distractors)
        corpora = {name: extend(corpus, distractors) for name, corpus in corpora.items()}
    table = questions.table
    if args.feature == "dense":
        from t2rag.retrieval.dense.embedder import Embedder, EmbedderConfig

        embedder = Embedder(EmbedderConfig(model=args.embedder))
        texts = sorted(set(table.column("question").to_pylist()))
        features = {name: dense_feature(corpus, embedder, texts) for name, corpus in corpora.items()}
    else:
        features = {name: quarter_feature(corpus) for name, corpus in corpora.items()}
    ids = table.column("id").to_pylist()
    text_of = dict(zip(ids, table.column("question").to_pylist(), strict=True))
    gold_of = dict(zip(ids, table.column("context_id").to_pylist(), strict=True))
    print(f"{args.method}'s top 10 + weight x {args.feature}")
    print("| run | weight | MRR@3 | R@1 |")
    print("|---|--:|--:|--:|")
    for run in args.runs:
        records = read_records(run)
        records = records.filter(pc.equal(records.column("method"), args.method)).to_pylist()
        tally = np.zeros((len(weights), 2))
        for r in records:
            found = [i for i in r["context_ids"] if i is not None]
            scores = np.asarray(r["scores"][: len(found)])
            feature = features[r["subset"]](text_of[r["id"]], found)
            gold = np.array([i == gold_of[r["id"]] for i in found])
            for w, weight in enumerate(weights):
                ranked = gold[np.argsort(-(scores + weight * feature), kind="stable")]
                hit = np.flatnonzero(ranked[:3])
                tally[w] += (ranked[0], 1 / (hit[0] + 1) if len(hit) else 0.0)
        for w, weight in enumerate(weights):
            mrr, r1 = 100 * tally[w, 1] / len(records), 100 * tally[w, 0] / len(records)
            print(f"| {run} | {weight:g} | {mrr:.2f} | {r1:.2f} |")


if __name__ == "__main__":
    main()
