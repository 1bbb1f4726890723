"""Per-subset metric tables and the weighted average over subsets (the paper's "W. Avg Total").

All values are percentages. Every summary is built from per-subset totals (counts and sums of per-question
values), so the single-process scorer and the distributed reduce share one formula. The weighted average weights
each subset by the number of questions its metric was computed on, which equals the mean over all questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from t2rag.data.schema import SUBSETS

DEFAULT_RETRIEVAL_METRICS: tuple[str, ...] = ("mrr@3", "mrr@5", "recall@1", "recall@3", "recall@5", "ndcg@3")


def ordered_subsets(names: Sequence[str] | np.ndarray) -> list[str]:
    present = {str(n) for n in names}
    return [s for s in SUBSETS if s in present] + sorted(present - set(SUBSETS))


def _pct(numerator: float, denominator: int) -> float:
    return round(100.0 * numerator / denominator, 4) if denominator else float("nan")


#: The interval reported beside every Number Match: 95% Wilson score interval, in percent.
NM_INTERVAL = "number_match_ci95"


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> list[float]:
    """The Wilson score interval of a proportion, in percent ([nan, nan] without trials). Unlike the normal
    approximation it stays inside [0, 100] and is not empty at 0 or n successes, which small generation
    samples hit often."""
    if trials <= 0:
        return [float("nan"), float("nan")]
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return [round(100 * max(0.0, centre - half), 2), round(100 * min(1.0, centre + half), 2)]


@dataclass
class SubsetTotals:
    """Counts and sums for one subset; `generated`/`retrieved` are None when that metric group is absent."""

    questions: int
    generated: int | None = None
    matched: int = 0
    non_numeric: int = 0
    retrieved: int | None = None
    metric_sums: dict[str, float] = field(default_factory=dict)

    def entry(self, retrieval_metrics: Sequence[str]) -> dict[str, float | int]:
        out: dict[str, float | int] = {"questions": self.questions}
        if self.generated is not None:
            out["generated"] = self.generated
            out["number_match"] = _pct(self.matched, self.generated)
            out[NM_INTERVAL] = wilson_interval(self.matched, self.generated)
            out["non_numeric_references"] = self.non_numeric
        if self.retrieved is not None:
            out["retrieved"] = self.retrieved
            for metric in retrieval_metrics:
                out[metric] = _pct(self.metric_sums.get(metric, 0.0), self.retrieved)
        return out


def summary_from_totals(
    totals: dict[str, SubsetTotals], retrieval_metrics: Sequence[str] = DEFAULT_RETRIEVAL_METRICS
) -> dict[str, dict]:
    """`{"subsets": {name: {...}}, "weighted": {...}}` from per-subset totals."""
    per_subset = {name: totals[name].entry(retrieval_metrics) for name in ordered_subsets(list(totals))}
    weighted = weighted_average(per_subset)
    generated = [t for t in totals.values() if t.generated is not None]
    if generated:
        weighted[NM_INTERVAL] = wilson_interval(sum(t.matched for t in generated), sum(t.generated for t in generated))
    return drop_empty_groups({"subsets": per_subset, "weighted": weighted})


def weighted_average(per_subset: dict[str, dict]) -> dict[str, float | int]:
    """Average every metric over subsets, weighting each subset by the questions that metric counted."""
    out: dict[str, float | int] = {"questions": sum(int(e["questions"]) for e in per_subset.values())}
    metrics: list[str] = []
    for entry in per_subset.values():
        metrics += [k for k in entry if k not in metrics and k not in ("questions", "generated", "retrieved")]
    for key in ("generated", "retrieved"):
        if any(key in e for e in per_subset.values()):
            out[key] = sum(int(e.get(key, 0)) for e in per_subset.values())
    for metric in metrics:
        if metric == NM_INTERVAL:
            continue  # not an average: summary_from_totals computes it from the pooled counts
        if metric == "non_numeric_references":
            out[metric] = sum(int(e.get(metric, 0)) for e in per_subset.values())
            continue
        weight_key = "generated" if metric == "number_match" else "retrieved"
        pairs = [
            (float(e[metric]), int(e.get(weight_key, e["questions"])))
            for e in per_subset.values()
            if metric in e and not math.isnan(e[metric])
        ]
        total = sum(w for _, w in pairs)
        out[metric] = round(sum(v * w for v, w in pairs) / total, 4) if total else float("nan")
    return out


def drop_empty_groups(summary: dict) -> dict:
    """Leave out metric groups no question took part in (e.g. retrieval metrics of the oracle method)."""
    entries = [*summary["subsets"].values(), summary["weighted"]]
    drops: list[str] = []
    if all(e.get("generated", 1) == 0 for e in entries):
        drops += ["generated", "number_match", NM_INTERVAL, "non_numeric_references"]
    if all(e.get("retrieved", 1) == 0 for e in entries):
        drops += ["retrieved", *[k for k in summary["weighted"] if "@" in k]]
    for e in entries:
        for key in drops:
            e.pop(key, None)
    return summary
