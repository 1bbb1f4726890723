"""Fit the fused retrievers' weights on a dev split and write them into a run config (`t2rag fit-fusion`).

Every component of a fused retriever (`t2rag.retrieval.fusion.weighted`) is computed once for every question of the
split against its subset's corpus. The weights are those of a linear listwise ranker: nonnegative weights that maximise
the likelihood of each question's gold context under a softmax over all of its subset's contexts (a small L2 penalty
keeps them finite), fitted by L-BFGS-B; they are written with lexical scaled to 1 (only ratios rank) and rounded to
three decimals. Unlike a grid over weights, this scales to many components and fits a smooth surrogate of the rank,
which held up better on questions it did not see (bm25_meta's held-out halves: 92.16 against a grid's 91.98). A test
split is refused. The fit is also checked on data it did not see: the questions are split in two halves by the report
their gold context is a page of (its company and report year in the corpus's metadata, so no report has pages on both
sides and a held-out page never has a sibling in the fitted half), weights are fitted on each half and scored on the
other, and that held-out MRR@3 is reported beside the in-sample one, and so is each method's retrieval cost per question
against plain BM25 on the same questions (query embedding included; the median of the ratios within alternating
rounds), so the config written can keep to a cost budget.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import minimize

from t2rag.data.corpus import Corpus
from t2rag.data.load import QuestionSet
from t2rag.errors import ConfigError
from t2rag.progress import call_seconds, paired_ratio
from t2rag.retrieval.base import Retriever
from t2rag.retrieval.config import RetrievalConfig, build_retriever, fused_retriever
from t2rag.retrieval.fusion.weighted import FUSED_METHODS, FusionWeights

#: L2 penalty on the raw weights (whose scale is the softmax's inverse temperature), per question.
L2_PENALTY = 1e-3
#: Every raw weight's starting value.
START = 5.0


@dataclass
class SubsetParts:
    """One subset's questions: every component's (questions x documents) matrix, the gold positions and folds."""

    components: dict[str, np.ndarray]
    gold: np.ndarray  # gold position per question
    fold: np.ndarray  # 0 or 1, by the report of the gold context (`report_folds`)
    questions: list[str]


@dataclass
class FitResult:
    method: str
    weights: FusionWeights
    questions: int
    mrr_at_3: float  # in-sample, question-weighted over subsets
    recall_at_1: float
    recall_at_5: float
    held_out_mrr_at_3: float  # 2-fold, weights fitted on the other half
    held_out_recall_at_1: float
    cost_vs_bm25: float  # seconds per question (query embedding included) over plain BM25's, same questions
    subsets: dict[str, dict[str, float]] = field(default_factory=dict)


def gold_rank(fused: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """1-based rank of each question's gold document (ties: corpus order, as the retrievers break them)."""
    g = fused[np.arange(len(gold)), gold][:, None]
    before = (fused > g) | ((fused == g) & (np.arange(fused.shape[1])[None, :] < gold[:, None]))
    return before.sum(axis=1) + 1


@dataclass(frozen=True)
class Scores:
    """Question-weighted rank metrics (in %) of one set of weights over the questions scored."""

    mrr_at_3: float
    recall_at_1: float
    recall_at_5: float
    questions: int


def score_weights(parts: list[SubsetParts], weights: dict[str, float], fold: int | None) -> Scores:
    """MRR@3, Recall@1 and Recall@5 over the questions (of one fold, or all) of every subset, question-weighted."""
    mrr = first = recall = 0.0
    count = 0
    for p in parts:
        rows = np.ones(len(p.gold), bool) if fold is None else p.fold == fold
        if not rows.any():
            continue
        fused = sum(w * p.components[c][rows] for c, w in weights.items())
        rank = gold_rank(fused, p.gold[rows])
        mrr += float(np.where(rank <= 3, 1.0 / rank, 0.0).sum())
        first += float((rank == 1).sum())
        recall += float((rank <= 5).sum())
        count += int(rows.sum())
    n = max(count, 1)
    return Scores(100 * mrr / n, 100 * first / n, 100 * recall / n, count)


def held_out(parts: list[SubsetParts], components: tuple[str, ...]) -> Scores:
    """Weights fitted on each half of the questions (by their gold's report), scored on the other half, pooled."""
    halves = [score_weights(parts, fit_weights(parts, components, 1 - f), f) for f in (0, 1)]
    n = max(sum(h.questions for h in halves), 1)
    return Scores(
        *(sum(getattr(h, m) * h.questions for h in halves) / n for m in ("mrr_at_3", "recall_at_1", "recall_at_5")),
        n,
    )


def _log_likelihood(
    parts: list[SubsetParts], components: tuple[str, ...], fold: int | None, w: np.ndarray
) -> tuple[float, np.ndarray]:
    """Mean negative log-likelihood of the gold contexts under a softmax of the weighted components, plus the L2
    penalty, and its gradient in w."""
    loss, grad, count = 0.0, np.zeros(len(components)), 0
    for p in parts:
        rows = np.ones(len(p.gold), bool) if fold is None else p.fold == fold
        if not rows.any():
            continue
        values = [p.components[c][rows].astype(np.float64) for c in components]
        logits = sum(wi * v for wi, v in zip(w, values, strict=True))
        logits -= logits.max(axis=1, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(axis=1, keepdims=True)
        gold = p.gold[rows]
        at = np.arange(len(gold))
        loss -= float(np.log(np.maximum(prob[at, gold], 1e-300)).sum())
        grad -= np.array([float((v[at, gold] - (prob * v).sum(axis=1)).sum()) for v in values])
        count += len(gold)
    count = max(count, 1)
    return loss / count + L2_PENALTY * float(w @ w), grad / count + 2 * L2_PENALTY * w


def fit_weights(parts: list[SubsetParts], components: tuple[str, ...], fold: int | None) -> dict[str, float]:
    """The listwise ranker's weights on the questions of one fold (or all), lexical scaled to 1, 3 decimals."""
    result = minimize(
        lambda w: _log_likelihood(parts, components, fold, w),
        np.full(len(components), START),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * len(components),
        options={"ftol": 1e-13, "gtol": 1e-9, "maxiter": 1000},  # to the optimum, not near it: reruns agree
    )
    raw = dict(zip(components, result.x, strict=True))
    unit = raw.get("lexical") or max(raw.values()) or 1.0
    return {c: round(float(v) / unit, 3) for c, v in raw.items()}


@dataclass(frozen=True)
class FitSubset:
    """One subset to fit on: its corpus, and its scored questions with their gold context ids."""

    corpus: Corpus
    questions: list[str]
    gold_ids: list[str]


def fit_subsets(questions: QuestionSet, corpus_of: Callable[[str], Corpus]) -> dict[str, FitSubset]:
    """Every subset of a question set with the corpus `corpus_of` gives it (a run's `Resources.corpus`)."""
    out = {}
    for subset in questions.subsets:
        rows = questions.subset(subset).scored()
        out[subset] = FitSubset(corpus_of(subset), rows.column("question").to_pylist(),
                                rows.column("context_id").to_pylist())  # fmt: skip
    return out


def subset_parts(retrieval: RetrievalConfig, method: str, subset: FitSubset) -> SubsetParts:
    """Every component of a fused method for the subset's questions, computed once."""
    components = FUSED_METHODS[method].components
    probe = fused_retriever(method, retrieval, FusionWeights(**dict.fromkeys(components, 1.0)))  # every component on
    probe.index(subset.corpus)
    corpus = probe.corpus
    gold_ids = subset.gold_ids
    known = [cid in corpus.positions for cid in gold_ids]
    questions = [q for q, ok in zip(subset.questions, known, strict=True) if ok]
    gold_ids = [cid for cid, ok in zip(gold_ids, known, strict=True) if ok]
    gold = np.array([corpus.positions[cid] for cid in gold_ids], dtype=np.int64)
    values = probe.components(questions)
    return SubsetParts({c: values[c].astype(np.float32) for c in components}, gold, report_folds(corpus, gold),
                       questions)  # fmt: skip


def report_folds(corpus: Corpus, positions: np.ndarray) -> np.ndarray:
    """0 or 1 for each context at `positions`, by a hash of its report (`Corpus.reports`): every page of a report on
    one side."""
    keys = [corpus.reports[int(p)] for p in positions]
    return np.array([hashlib.sha256(k.encode()).digest()[0] % 2 for k in keys], dtype=np.int64)


#: Alternating timed rounds of each fit's cost: on the sample a search takes a fraction of a second and rounds differ
#: by 20%, so a median of three decided the 3x budget by chance (bm25_focus measured 2.9x to 3.7x); the ratio is
#: taken within each round before the median (`paired_ratio`), as `bench/retrieval_cost.py` takes it.
COST_ROUNDS = 7


def search_seconds(
    retrievers: list[Retriever], corpus: Corpus, questions: list[str], rounds: int = 3
) -> list[list[float]]:
    """Seconds each retriever takes to rank the corpus for the questions as one block (embedding them too), in
    each of `rounds` rounds, the retrievers taking turns in every round so that a busy spell of the machine falls on
    all of them alike (`t2rag.progress.paired_ratio` compares them round by round)."""
    for retriever in retrievers:
        retriever.index(corpus)
        retriever.search(questions[:8], 3)  # loads what loads lazily
    runs: list[list[float]] = [[] for _ in retrievers]
    for _ in range(rounds):
        for retriever, times in zip(retrievers, runs, strict=True):
            times.append(timed_search(retriever, questions))
    return runs


def timed_search(retriever: Retriever, questions: list[str]) -> float:
    """Seconds one search of the questions takes (`t2rag.progress.call_seconds`: the garbage collector off)."""
    return call_seconds(lambda: retriever.search(questions, 3))


def require_dev_split(split: str | None) -> None:
    """Refuse to fit on anything but a named dev split: never tune on a test split."""
    if split is None or "test" in split.lower():
        raise ConfigError(f"fit-fusion fits on a dev split only (got --split {split}); never tune on a test split")


def fit_fusion(
    retrieval: RetrievalConfig,
    subsets: dict[str, FitSubset],
    split: str | None,
    methods: list[str] | None = None,
) -> list[FitResult]:
    """Fit every named fused method's weights (every fused method's when None) on the subsets' questions, which
    must be of a dev split (`split`)."""
    methods = list(FUSED_METHODS) if methods is None else methods
    require_dev_split(split)
    unknown = [m for m in methods if m not in FUSED_METHODS]
    if unknown:
        raise ConfigError(f"not fused methods: {unknown} (fused: {', '.join(FUSED_METHODS)})")
    results = []
    for method in methods:
        parts = {name: subset_parts(retrieval, method, subset) for name, subset in subsets.items()}
        components = FUSED_METHODS[method].components
        chosen = fit_weights(list(parts.values()), components, None)
        fitted = score_weights(list(parts.values()), chosen, None)
        unseen = held_out(list(parts.values()), components)
        per_subset = {}
        weights = FusionWeights(**chosen)
        cost, plain = np.zeros(COST_ROUNDS), np.zeros(COST_ROUNDS)  # seconds per round, the subsets summed
        for name, p in parts.items():
            one = score_weights([p], chosen, None)
            per_subset[name] = {
                "questions": one.questions,
                "mrr@3": round(one.mrr_at_3, 2),
                "recall@1": round(one.recall_at_1, 2),
                "recall@5": round(one.recall_at_5, 2),
            }
            corpus, texts = subsets[name].corpus, p.questions
            fused, bm25 = fused_retriever(method, retrieval, weights), build_retriever("bm25", retrieval)
            fused_runs, bm25_runs = search_seconds([fused, bm25], corpus, texts, COST_ROUNDS)
            cost, plain = cost + fused_runs, plain + bm25_runs
        results.append(
            FitResult(
                method,
                weights,
                fitted.questions,
                round(fitted.mrr_at_3, 2),
                round(fitted.recall_at_1, 2),
                round(fitted.recall_at_5, 2),
                round(unseen.mrr_at_3, 2),
                round(unseen.recall_at_1, 2),
                round(paired_ratio(cost, plain), 2),
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
    path: str | Path,
    results: list[FitResult],
    best: FitResult,
    command: str,
    where: str,
    retrieval: RetrievalConfig,
    max_cost: float | None,
) -> None:
    """A retrieval-only run config (k = 3) of the best fit, with every fitted method's weights and the embedder
    they were fitted with; `where` names the data they were fitted on."""
    embedder = retrieval.embedder
    lines = [
        f"# Written by `{command}`",
        f"# Weights fitted on {where}; never on a test split.",
        *(
            f"# {r.method}: {r.questions} questions, MRR@3 {r.mrr_at_3} (held-out halves: {r.held_out_mrr_at_3}), "
            f"Recall@1 {r.recall_at_1} (held-out halves: {r.held_out_recall_at_1}), Recall@5 {r.recall_at_5}, "
            f"cost per question {r.cost_vs_bm25}x BM25's"
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
