"""Fit the fused retrievers' weights on a dev split and write them into a run config (`t2rag fit-fusion`).

Every component of a fused retriever (`t2rag.retrieval.fused`) is computed once for every question of the split
against its subset's corpus; a grid of weights (lexical fixed at 1: only ratios matter) is then scored on the gold
ranks, vectorised, and the weights with the best question-weighted MRR@3 (then Recall@5) win. A test split is
refused. The fit is also checked on data it did not see: the questions are split in two halves by their gold
context (so no context is in both), weights are fitted on each half and scored on the other, and that held-out
MRR@3 is reported beside the in-sample one, and so is each method's retrieval cost per question against plain BM25
on the same questions (query embedding included), so the config written can keep to a cost budget.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from t2rag.config import RunConfig
from t2rag.data.corpus import Corpus
from t2rag.errors import ConfigError
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval.base import Retriever
from t2rag.retrieval.config import build_retriever, fused_retriever
from t2rag.retrieval.fused import FUSED_COMPONENTS, FusionWeights

#: Candidate weights per component (lexical is the unit).
GRID: dict[str, tuple[float, ...]] = {
    "dense": (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5),
    "company": (0.0, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0),
    "year": (0.0, 0.05, 0.1, 0.2, 0.3),
    "year_before": (0.0, 0.025, 0.05, 0.1, 0.2),
}


@dataclass
class SubsetParts:
    """One subset's questions: every component's (questions x documents) matrix, the gold positions and folds."""

    components: dict[str, np.ndarray]
    gold: np.ndarray  # gold position per question
    fold: np.ndarray  # 0 or 1, by gold context
    questions: list[str]


@dataclass
class FitResult:
    method: str
    weights: FusionWeights
    questions: int
    mrr_at_3: float  # in-sample, question-weighted over subsets
    recall_at_5: float
    held_out_mrr_at_3: float  # 2-fold, weights fitted on the other half
    cost_vs_bm25: float  # seconds per question (query embedding included) over plain BM25's, same questions
    subsets: dict[str, dict[str, float]] = field(default_factory=dict)


def gold_rank(fused: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """1-based rank of each question's gold document (ties: corpus order, as the retrievers break them)."""
    g = fused[np.arange(len(gold)), gold][:, None]
    before = (fused > g) | ((fused == g) & (np.arange(fused.shape[1])[None, :] < gold[:, None]))
    return before.sum(axis=1) + 1


def _scores(parts: list[SubsetParts], weights: dict[str, float], fold: int | None) -> tuple[float, float, int]:
    """MRR@3 and Recall@5 over the questions (of one fold, or all) of every subset, question-weighted."""
    mrr = recall = 0.0
    count = 0
    for p in parts:
        rows = np.ones(len(p.gold), bool) if fold is None else p.fold == fold
        if not rows.any():
            continue
        fused = sum(w * p.components[c][rows] for c, w in weights.items())
        rank = gold_rank(fused, p.gold[rows])
        mrr += float(np.where(rank <= 3, 1.0 / rank, 0.0).sum())
        recall += float((rank <= 5).sum())
        count += int(rows.sum())
    return 100 * mrr / max(count, 1), 100 * recall / max(count, 1), count


def _grid(components: tuple[str, ...]) -> list[dict[str, float]]:
    free = [c for c in components if c != "lexical"]
    lexical = {"lexical": 1.0} if "lexical" in components else {}
    return [
        {**lexical, **dict(zip(free, values, strict=True))} for values in itertools.product(*(GRID[c] for c in free))
    ]


def _best(parts: list[SubsetParts], grid: list[dict[str, float]], fold: int | None) -> dict[str, float]:
    return max(grid, key=lambda w: _scores(parts, w, fold)[:2])


def subset_parts(resources: Resources, method: str, subset: str) -> SubsetParts:
    """Every component of a fused method for the subset's questions, computed once."""
    config = resources.config.retrieval
    components = FUSED_COMPONENTS[method]
    probe = fused_retriever(method, config, FusionWeights(**dict.fromkeys(components, 1.0)))  # every component on
    probe.index(resources.corpus(subset))
    rows = resources.questions.subset(subset).scored()
    corpus = probe.corpus
    gold_ids = rows.column("context_id").to_pylist()
    known = [cid in corpus.positions for cid in gold_ids]
    questions = [q for q, ok in zip(rows.column("question").to_pylist(), known, strict=True) if ok]
    gold_ids = [cid for cid, ok in zip(gold_ids, known, strict=True) if ok]
    fold = np.array([hashlib.sha256(cid.encode()).digest()[0] % 2 for cid in gold_ids], dtype=np.int64)
    values = probe.components(questions)
    return SubsetParts(
        {c: values[c].astype(np.float32) for c in components},
        np.array([corpus.positions[cid] for cid in gold_ids], dtype=np.int64),
        fold,
        questions,
    )


def search_seconds(retriever: Retriever, corpus: Corpus, questions: list[str]) -> float:
    """Seconds to rank the corpus for the questions as one block (embedding them too), the faster of two runs."""
    retriever.index(corpus)
    retriever.search(questions[:8], 3)  # loads what loads lazily
    runs = []
    for _ in range(2):
        start = time.perf_counter()
        retriever.search(questions, 3)
        runs.append(time.perf_counter() - start)
    return min(runs)


def fit_fusion(config: RunConfig, methods: list[str]) -> list[FitResult]:
    """Fit every named fused method's weights on the config's data (a dev split)."""
    split = config.data.split
    if split is None or "test" in split.lower():
        raise ConfigError(f"fit-fusion fits on a dev split only (got --split {split}); never tune on a test split")
    unknown = [m for m in methods if m not in FUSED_COMPONENTS]
    if unknown:
        raise ConfigError(f"not fused methods: {unknown} (fused: {', '.join(FUSED_COMPONENTS)})")
    resources = Resources(config)
    results = []
    for method in methods:
        get_method(method)
        parts = {s: subset_parts(resources, method, s) for s in resources.questions.subsets}
        grid = _grid(FUSED_COMPONENTS[method])
        chosen = _best(list(parts.values()), grid, None)
        mrr, recall, count = _scores(list(parts.values()), chosen, None)
        held = [_scores(list(parts.values()), _best(list(parts.values()), grid, 1 - f), f) for f in (0, 1)]
        held_mrr = sum(m * n for m, _, n in held) / max(sum(n for *_, n in held), 1)
        per_subset = {}
        weights = FusionWeights(**chosen)
        cost = plain = 0.0
        for name, p in parts.items():
            m, r, n = _scores([p], chosen, None)
            per_subset[name] = {"questions": n, "mrr@3": round(m, 2), "recall@5": round(r, 2)}
            corpus, texts = resources.corpus(name), p.questions
            cost += search_seconds(fused_retriever(method, config.retrieval, weights), corpus, texts)
            plain += search_seconds(build_retriever("bm25", config.retrieval), corpus, texts)
        results.append(
            FitResult(
                method,
                weights,
                count,
                round(mrr, 2),
                round(recall, 2),
                round(held_mrr, 2),
                round(cost / plain, 2),
                per_subset,
            )
        )
    return results


def best_fit(results: list[FitResult], max_cost: float | None) -> FitResult:
    """The fit with the best MRR@3 (then Recall@5) among those within max_cost x BM25's cost (all when None, or
    when none is)."""
    affordable = [r for r in results if max_cost is None or r.cost_vs_bm25 <= max_cost] or results
    return max(affordable, key=lambda r: (r.mrr_at_3, r.recall_at_5))


def write_config(
    path: str | Path, results: list[FitResult], best: FitResult, command: str, fitted: RunConfig, max_cost: float | None
) -> None:
    """A retrieval-only run config (k = 3) of the best fit, with every fitted method's weights and the embedder
    they were fitted with."""
    data, embedder = fitted.data, fitted.retrieval.embedder
    where = f"{data.source or 'the bundled sample'} ({', '.join(data.subsets or ['every subset'])}, split {data.split})"
    lines = [
        f"# Written by `{command}`",
        f"# Weights fitted on {where}; never on a test split.",
        *(
            f"# {r.method}: {r.questions} questions, MRR@3 {r.mrr_at_3} (held-out halves: {r.held_out_mrr_at_3}), "
            f"Recall@5 {r.recall_at_5}, cost per question {r.cost_vs_bm25}x BM25's"
            for r in results
        ),
        f"# Best{f' within {max_cost:g}x BM25 cost per question' if max_cost else ''}: {best.method}",
        "# Run it on another dataset in the hub layout: t2rag eval --config THIS_FILE --data DIR_OR_S3_OR_HUB_ID",
    ]
    body = {
        "name": Path(path).stem,
        "methods": [best.method],
        "retrieval_only": True,
        "retrieval": {
            "k": 3,
            "embedder": {"model": embedder.model, **embedder.model_dump(exclude_defaults=True)},
            "fusion": {"weights": {r.method: _nonzero(r.weights) for r in results}},
        },
        "out": f"runs/{Path(path).stem}",
    }
    text = "\n".join(lines) + "\n" + yaml.safe_dump(body, sort_keys=False)
    Path(path).write_text(text, encoding="utf-8")


def _nonzero(weights: FusionWeights) -> dict[str, float]:
    return {c: w for c, w in weights.model_dump().items() if w or c == "lexical"}
