"""Is one method's lead over another real? Paired tests over the questions both scored.

Number Match, EM, execution accuracy and Recall@k are right/wrong per question: McNemar's exact test (a two-sided
binomial test of the discordant pairs against one half). MRR@k, NDCG@k and F1 are graded: a paired randomization
test that flips the sign of each question's difference (`ROUNDS` random sign vectors, seeded, p = (extreme + 1) /
(ROUNDS + 1)). Every difference comes with its 95% interval, the mean per-question difference plus or minus 1.96
standard errors (for right/wrong metrics the Wald interval of paired proportions). Values are in percent points, as
in the scorecards. Holm's step-down correction says which of a family of differences hold at 0.05.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.stats import binomtest

from t2rag.metrics.retrieval import parse_metric, per_query
from t2rag.run_folder.scorecards import ordered_subsets

ROUNDS = 10_000
ALPHA = 0.05
#: The row over every subset's questions together (the scorecards' weighted average is that mean).
ALL_SUBSETS = "weighted"
Z95 = 1.959964


@dataclass(frozen=True)
class Difference:
    """One metric of two methods over the questions both scored: `a`, `b` and `diff` = a - b in points."""

    method: str
    subset: str
    metric: str
    a: float
    b: float
    diff: float
    ci95: list[float]
    p_value: float
    test: str
    questions: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def mcnemar_p(a: np.ndarray, b: np.ndarray) -> float:
    """McNemar's exact two-sided p-value for paired right/wrong verdicts."""
    only_a = int(np.sum(a & ~b))
    only_b = int(np.sum(~a & b))
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def randomization_p(diffs: np.ndarray, rounds: int = ROUNDS, seed: int = 0) -> float:
    """Two-sided p-value of a paired sign-flip randomization test of the mean difference."""
    nonzero = diffs[diffs != 0]  # a zero difference is the same under either sign
    if len(nonzero) == 0:
        return 1.0
    observed = abs(nonzero.sum())
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, rounds, 1000):
        signs = np.where(rng.random((min(1000, rounds - start), len(nonzero)), np.float32) < 0.5, -1.0, 1.0)
        extreme += int(np.sum(np.abs(signs @ nonzero) >= observed * (1 - 1e-9)))
    return (extreme + 1) / (rounds + 1)


def diff_interval(diffs: np.ndarray) -> list[float]:
    """The 95% interval of the mean of paired differences (normal approximation)."""
    mean = float(diffs.mean())
    if len(diffs) < 2:
        return [mean, mean]
    half = Z95 * float(diffs.std(ddof=1)) / float(np.sqrt(len(diffs)))
    return [mean - half, mean + half]


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at `alpha` (family-wise)."""
    order = np.argsort(p_values, kind="stable")
    rejected = [False] * len(p_values)
    for step, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - step):
            break
        rejected[i] = True
    return rejected


#: The answer metrics: a record's own column holds its per-question value (0/1, or 0..1 for F1).
ANSWER_METRICS = ("number_match", "em", "f1", "exe_acc", "program_acc")
#: The routing metrics: a routed record's own column (t2rag.stages.route).
ROUTING_METRICS = ("routing_acc", "routing_ndcg3")
BINARY_COLUMN_METRICS = ("number_match", "em", "exe_acc", "program_acc", "routing_acc")


def _values(records: pa.Table, method: str, metric: str) -> dict[tuple[str, str], float]:
    """{(subset, id): per-question value in percent} of the method's records scored on the metric."""
    part = records.filter(pc.equal(records.column("method"), method))
    if metric in (*ANSWER_METRICS, *ROUTING_METRICS):
        if metric not in part.column_names:
            return {}
        scored = pc.is_valid(part.column(metric))
        if metric in ANSWER_METRICS:
            scored = pc.and_(scored, pc.is_valid(part.column("number_match")))
        part = part.filter(scored)
        values = part.column(metric).to_numpy(zero_copy_only=False).astype(float)
    else:
        part = part.filter(pc.is_valid(part.column("gold_rank")))
        values = per_query(metric, part.column("gold_rank").to_numpy(zero_copy_only=False))
    keys = zip(part.column("subset").to_pylist(), part.column("id").to_pylist(), strict=True)
    return dict(zip(keys, (100.0 * values).tolist(), strict=True))


def is_binary(metric: str) -> bool:
    if metric in (*ANSWER_METRICS, *ROUTING_METRICS):
        return metric in BINARY_COLUMN_METRICS
    return parse_metric(metric)[0] == "recall"


def compare(
    records_a: pa.Table,
    method_a: str,
    records_b: pa.Table,
    method_b: str,
    metrics: Sequence[str],
    label: str | None = None,
) -> list[Difference]:
    """Every metric of `method_a` (in `records_a`) against `method_b` (in `records_b`), per subset and over all
    subsets, over the questions both scored; a metric neither scored is left out. `label` names the pair."""
    label = label or (method_a if method_a == method_b else f"{method_a} vs {method_b}")
    out: list[Difference] = []
    for metric in metrics:
        out += _compared(label, metric, _values(records_a, method_a, metric), _values(records_b, method_b, metric))
    return out


def _compared(label: str, metric: str, a: dict[tuple[str, str], float], b: dict[tuple[str, str], float]):
    keys = sorted(a.keys() & b.keys())
    if not keys:
        return []
    subsets = np.asarray([s for s, _ in keys], dtype=object)
    va = np.asarray([a[k] for k in keys])
    vb = np.asarray([b[k] for k in keys])
    out = []
    for subset in [*ordered_subsets(subsets), ALL_SUBSETS]:
        mask = np.ones(len(keys), bool) if subset == ALL_SUBSETS else subsets == subset
        out.append(_difference(label, subset, metric, va[mask], vb[mask]))
    return out


def _difference(label: str, subset: str, metric: str, a: np.ndarray, b: np.ndarray) -> Difference:
    diffs = a - b
    if is_binary(metric):
        p, test = mcnemar_p(a > 0, b > 0), "mcnemar_exact"
    else:
        p, test = randomization_p(diffs), "paired_randomization"
    return Difference(
        method=label,
        subset=subset,
        metric=metric,
        a=round(float(a.mean()), 4),
        b=round(float(b.mean()), 4),
        diff=round(float(diffs.mean()), 4),
        ci95=[round(x, 4) for x in diff_interval(diffs)],
        p_value=float(p),
        test=test,
        questions=len(diffs),
    )


def pairwise(records: pa.Table, methods: Sequence[str], metrics: Sequence[str]) -> list[Difference]:
    """Every pair of `methods` of one run (the earlier against the later), as `compare` gives them."""
    values = {(m, metric): _values(records, m, metric) for m in methods for metric in metrics}
    out: list[Difference] = []
    for i, first in enumerate(methods):
        for second in methods[i + 1 :]:
            label = f"{first} vs {second}"
            for metric in metrics:
                out += _compared(label, metric, values[(first, metric)], values[(second, metric)])
    return out


def significant(differences: Sequence[Difference], alpha: float = ALPHA) -> list[bool]:
    """Holm at `alpha` within each family of one metric on one subset row (the pairs one table column shows)."""
    families: dict[tuple[str, str], list[int]] = {}
    for i, d in enumerate(differences):
        families.setdefault((d.metric, d.subset), []).append(i)
    held = [False] * len(differences)
    for members in families.values():
        for i, ok in zip(members, holm([differences[i].p_value for i in members], alpha), strict=True):
            held[i] = ok
    return held
