"""Per-subset metric tables and the weighted average over subsets (the paper's "W. Avg Total").

All values are percentages. The weighted average weights each subset by the number of questions its metric was
computed on, which equals the mean over all questions pooled.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2rag.data.schema import SUBSETS
from t2rag.metrics.number_match import number_match as number_match_fn
from t2rag.metrics.retrieval import retrieval_metric

DEFAULT_RETRIEVAL_METRICS: tuple[str, ...] = ("mrr@3", "mrr@5", "recall@1", "recall@3", "recall@5", "ndcg@3")


def ordered_subsets(names: Sequence[str] | np.ndarray) -> list[str]:
    present = {str(n) for n in names}
    return [s for s in SUBSETS if s in present] + sorted(present - set(SUBSETS))


def _pct(x: float) -> float:
    return round(100.0 * x, 4)


def summarize(
    subsets: Sequence[str] | np.ndarray,
    *,
    predictions: np.ndarray | None = None,
    references: np.ndarray | None = None,
    ranks: np.ndarray | None = None,
    generated: np.ndarray | None = None,
    retrieved: np.ndarray | None = None,
    retrieval_metrics: Sequence[str] = DEFAULT_RETRIEVAL_METRICS,
) -> dict[str, dict]:
    """Summarise per-question results into `{"subsets": {name: {...}}, "weighted": {...}}`.

    predictions/references (floats, NaN for none) give Number Match over the rows where `generated` is true
    (all rows when it is None); ranks give retrieval metrics over rows where `retrieved` is true.
    """
    subsets = np.asarray(subsets, dtype=object)
    n = len(subsets)
    all_rows = np.ones(n, dtype=bool)
    per_subset: dict[str, dict] = {}
    if predictions is not None:
        if references is None:
            raise ValueError("number match needs references")
        gen = all_rows if generated is None else np.asarray(generated, dtype=bool)
        matches = number_match_fn(predictions, references)
        non_numeric = np.isnan(np.asarray(references, dtype=np.float64))
    if ranks is not None:
        ret = all_rows if retrieved is None else np.asarray(retrieved, dtype=bool)
        ranks = np.asarray(ranks)

    for name in ordered_subsets(subsets):
        in_subset = subsets == name
        entry: dict[str, float | int] = {"questions": int(in_subset.sum())}
        if predictions is not None:
            rows = in_subset & gen
            entry["generated"] = int(rows.sum())
            entry["number_match"] = _pct(matches[rows].mean()) if rows.any() else float("nan")
            entry["non_numeric_references"] = int(non_numeric[rows].sum())
        if ranks is not None:
            rows = in_subset & ret
            entry["retrieved"] = int(rows.sum())
            for metric in retrieval_metrics:
                entry[metric] = _pct(retrieval_metric(metric, ranks[rows])) if rows.any() else float("nan")
        per_subset[name] = entry
    return {"subsets": per_subset, "weighted": weighted_average(per_subset)}


def weighted_average(per_subset: dict[str, dict]) -> dict[str, float | int]:
    """Average every metric over subsets, weighting each subset by the questions that metric counted."""
    out: dict[str, float | int] = {"questions": sum(int(e["questions"]) for e in per_subset.values())}
    count_keys = {"number_match": "generated", "non_numeric_references": None}
    metrics: list[str] = []
    for entry in per_subset.values():
        metrics += [k for k in entry if k not in metrics and k not in ("questions", "generated", "retrieved")]
    for key in ("generated", "retrieved"):
        if any(key in e for e in per_subset.values()):
            out[key] = sum(int(e.get(key, 0)) for e in per_subset.values())
    for metric in metrics:
        if metric == "non_numeric_references":
            out[metric] = sum(int(e.get(metric, 0)) for e in per_subset.values())
            continue
        weight_key = count_keys.get(metric) or "retrieved"
        pairs = [
            (float(e[metric]), int(e.get(weight_key, e["questions"])))
            for e in per_subset.values()
            if metric in e and not np.isnan(e[metric])
        ]
        total = sum(w for _, w in pairs)
        out[metric] = round(sum(v * w for v, w in pairs) / total, 4) if total else float("nan")
    return out
