"""Page-level evidence on top of bm25_meta, measured before it becomes a retrieval component (issue 43).

bm25_meta finds the report; what it misses is mostly which page of it (`bench/retrieval_misses.py`). This scores, for
every dev question against every context of its subset, how much of the question names the context's table:
- rows: the question's words found in the table's row labels (first cells), idf-weighted over the corpus's labels;
- pairs: the question's adjacent word pairs found among the row labels' adjacent word pairs (share of its pairs);
- headers: the question's words among the table's header cells (idf-weighted);
- years: the question's years among the header cells (share of its years).
Each is added to bm25_meta's own fused components (its fitted weights unchanged) with a grid of weights; the best
weights are reported in-sample and, fitted on one half of the questions (split by gold context, as `t2rag fit-fusion`
splits them), scored on the other. Dev splits only. Usage: python bench/page_evidence.py [--data SOURCE]
"""

from __future__ import annotations

import argparse
import itertools
import re

import numpy as np
from scipy import sparse

from t2rag.config import load_config
from t2rag.fusion_fit import gold_rank, subset_parts
from t2rag.resources import Resources

WORD = re.compile(r"[a-z][a-z]+")
YEAR = re.compile(r"\b(?:19|20)\d\d\b")
#: Words that name no line item.
STOP_WORDS = (
    "the a an of in on for to and or by with from at as is are was were what which how much many did does do be "
    "been this that these those its it their total change percentage percent year years ratio average value amount "
    "between during"
)
STOP = frozenset(STOP_WORDS.split())
GRID = {"rows": (0.0, 0.2, 0.3, 0.4), "pairs": (0.0, 0.2, 0.4), "headers": (0.0, 0.05, 0.1), "years": (0.0, 0.05)}


def table_cells(text: str) -> tuple[list[str], list[str]]:
    """A context's markdown table: its row labels (first cells) and its header cells."""
    labels: list[str] = []
    headers: list[str] = []
    for line in (s.strip() for s in text.splitlines()):
        if not line.startswith("|"):
            continue
        cells = [c.strip().lower() for c in line.strip("|").split("|")]
        if all(set(c) <= set("-: ") for c in cells):
            continue
        headers = headers or cells
        if cells[0]:
            labels.append(cells[0])
    return labels, headers


def _words(text: str) -> list[str]:
    return [w for w in WORD.findall(text) if w not in STOP]


def _incidence(sets: list[set], vocab: dict) -> sparse.csr_matrix:
    """One row per set, a 1 in the column of each of its members that the vocabulary holds."""
    rows = [(i, vocab[x]) for i, members in enumerate(sets) for x in members if x in vocab]
    r, c = zip(*rows, strict=True) if rows else ((), ())
    return sparse.csr_matrix((np.ones(len(rows), np.float32), (r, c)), shape=(len(sets), len(vocab)))


def _overlap(asked: list[set], held: list[set], weighted: bool) -> np.ndarray:
    """(questions x contexts): the share of each question's items a context holds, by idf over the contexts when
    `weighted` (items no context holds count for nothing), else by count."""
    vocab = {x: i for i, x in enumerate(sorted({x for members in held for x in members}, key=str))}
    docs, asks = _incidence(held, vocab), _incidence(asked, vocab)
    if weighted:
        df = np.asarray(docs.sum(axis=0)).ravel()
        asks = asks.multiply(np.log((len(held) + 1) / (df + 0.5))).tocsr()
        total = np.asarray(asks.sum(axis=1)).ravel()
    else:
        total = np.array([len(members) for members in asked], np.float32)
    return np.asarray((asks @ docs.T).todense(), np.float32) / np.maximum(total, 1e-9)[:, None] * (total > 0)[:, None]


def evidence(questions: list[str], texts: list[str]) -> dict[str, np.ndarray]:
    """Every evidence score, (questions x contexts)."""
    tables = [table_cells(t) for t in texts]
    lowered = [q.lower() for q in questions]
    words = [set(_words(q)) for q in lowered]
    return {
        "rows": _overlap(words, [set(_words(" ".join(labels))) for labels, _ in tables], weighted=True),
        "pairs": _overlap(
            [set(itertools.pairwise(_words(q))) for q in lowered],
            [{p for label in labels for p in itertools.pairwise(_words(label))} for labels, _ in tables],
            weighted=False,
        ),
        "headers": _overlap(words, [set(_words(" ".join(headers))) for _, headers in tables], weighted=True),
        "years": _overlap(
            [set(YEAR.findall(q)) for q in lowered],
            [set(YEAR.findall(" ".join(headers))) for _, headers in tables],
            weighted=False,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    config = load_config(None, {"methods": ["bm25_meta"], "data": {"source": args.data, "split": "dev"}})
    resources = Resources(config)
    fitted = config.retrieval.fusion.weights["bm25_meta"].model_dump()
    parts = []
    for subset in resources.questions.subsets:
        part = subset_parts(resources, "bm25_meta", subset)
        part.components.update(evidence(part.questions, resources.corpus(subset).texts))
        parts.append(part)

    def scores(extra: dict[str, float], fold: int | None = None) -> tuple[float, float]:
        mrr = first = count = 0.0
        for p in parts:
            rows = np.ones(len(p.gold), bool) if fold is None else p.fold == fold
            weights = {**{c: fitted[c] for c in p.components if c in fitted}, **extra}
            rank = gold_rank(sum(w * p.components[c][rows] for c, w in weights.items()), p.gold[rows])
            mrr += float(np.where(rank <= 3, 1.0 / rank, 0.0).sum())
            first += float((rank == 1).sum())
            count += int(rows.sum())
        return 100 * mrr / count, 100 * first / count

    grid = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    print("| weights | MRR@3 | R@1 |\n|---|--:|--:|")
    print("| bm25_meta as fitted | {:.2f} | {:.2f} |".format(*scores(dict.fromkeys(GRID, 0.0))))
    best = max(grid, key=scores)
    print("| best in-sample {} | {:.2f} | {:.2f} |".format(best, *scores(best)))
    for fold in (0, 1):
        chosen = max(grid, key=lambda w, f=fold: scores(w, f))
        print(
            "| fitted on half {}, scored on the other: {} | {:.2f} | {:.2f} |".format(
                fold, chosen, *scores(chosen, 1 - fold)
            )
        )


if __name__ == "__main__":
    main()
