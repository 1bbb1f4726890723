"""Paired tests: McNemar against scipy's binomial test on discordant pairs counted from a real run's records, the
randomization test at its two extremes, intervals and Holm's correction."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from scipy.stats import binomtest

from t2rag.results.numbers import scorecards_of
from t2rag.results.records import read_records
from t2rag.results.significance import (
    ROUNDS,
    compare,
    diff_interval,
    holm,
    mcnemar_p,
    pairwise,
    randomization_p,
    significant,
)


@pytest.fixture(scope="module")
def records(scripted_run):
    return read_records(scripted_run)


def _verdicts(records, method: str, column: str = "number_match") -> dict[tuple[str, str], object]:
    rows = records.filter(pc.equal(records.column("method"), method)).to_pylist()
    return {(r["subset"], r["id"]): r[column] for r in rows if r[column] is not None}


@pytest.mark.parametrize(("a", "b"), [("bm25", "bm25_meta"), ("pretrained_only", "oracle"), ("oracle", "bm25")])
def test_mcnemar_is_the_binomial_test_of_the_discordant_pairs(records, a, b):
    va, vb = _verdicts(records, a), _verdicts(records, b)
    shared = sorted(va.keys() & vb.keys())
    only_a = sum(va[k] and not vb[k] for k in shared)
    only_b = sum(vb[k] and not va[k] for k in shared)
    expected = binomtest(only_a, only_a + only_b, 0.5).pvalue
    (row,) = [d for d in compare(records, a, records, b, ["number_match"]) if d.subset == "weighted"]
    assert row.questions == len(shared) == 240 and row.test == "mcnemar_exact"
    assert row.p_value == pytest.approx(expected, rel=1e-12)
    assert row.diff == pytest.approx(100 * (only_a - only_b) / len(shared), abs=1e-4)
    summaries = scorecards_of(records)
    assert row.a == pytest.approx(summaries[a]["weighted"]["number_match"], abs=1e-3)
    assert row.b == pytest.approx(summaries[b]["weighted"]["number_match"], abs=1e-3)


def test_recall_uses_mcnemar_and_mrr_the_randomization_test(records):
    rows = {(d.metric, d.subset): d for d in compare(records, "bm25", records, "bm25_meta", ["recall@1", "mrr@3"])}
    assert rows[("recall@1", "FinQA")].test == "mcnemar_exact" and rows[("recall@1", "FinQA")].questions == 883
    assert rows[("mrr@3", "weighted")].test == "paired_randomization" and rows[("mrr@3", "weighted")].questions == 2025
    # bm25_meta's lead in MRR@3 is large and real: no sign flip of 10,000 reaches it.
    assert rows[("mrr@3", "weighted")].p_value == pytest.approx(1 / (ROUNDS + 1))
    lo, hi = rows[("mrr@3", "weighted")].ci95
    assert lo < rows[("mrr@3", "weighted")].diff < hi < 0


def test_a_method_against_itself_differs_by_nothing(records):
    for d in compare(records, "bm25", records, "bm25", ["number_match", "mrr@3", "recall@3"]):
        assert d.diff == 0 and d.p_value == 1.0 and d.ci95 == [0.0, 0.0]


def test_randomization_p_at_its_extremes():
    rng = np.random.default_rng(5)
    scores = rng.random(300)
    assert randomization_p(scores - scores) == 1.0  # identical inputs
    assert randomization_p(rng.normal(0.3, 0.1, 300)) < 0.001  # a large, consistent difference
    noise = rng.normal(0, 1, 300)
    assert 0.05 < randomization_p(noise - noise.mean()) <= 1.0  # no difference on average


def test_mcnemar_and_intervals_on_known_counts():
    a = np.array([True] * 10 + [False] * 2 + [True] * 30 + [False] * 8)
    b = np.array([False] * 10 + [True] * 2 + [True] * 30 + [False] * 8)
    assert mcnemar_p(a, b) == pytest.approx(binomtest(10, 12, 0.5).pvalue)
    assert mcnemar_p(a, a) == 1.0
    diffs = 100.0 * (a.astype(float) - b.astype(float))
    lo, hi = diff_interval(diffs)
    n, mean = len(diffs), diffs.mean()
    half = 1.959964 * np.sqrt(((diffs - mean) ** 2).sum() / (n - 1)) / np.sqrt(n)
    assert (lo, hi) == pytest.approx((mean - half, mean + half))


def test_holm_steps_down_until_the_first_p_that_fails():
    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
    assert holm([0.01, 0.02, 0.03]) == [True, True, True]  # 0.01 <= .05/3, 0.02 <= .05/2, 0.03 <= .05
    assert holm([0.2, 0.001]) == [False, True]
    assert holm([]) == []


def test_significance_families_are_one_metric_and_subset(records):
    found = pairwise(records, ["oracle", "pretrained_only", "bm25", "bm25_meta"], ["number_match", "mrr@3"])
    held = significant(found)
    # Six pairs answer Number Match, one pair (bm25, bm25_meta) ranks; three subset rows each.
    assert sum(d.metric == "number_match" for d in found) == 6 * 3
    assert sum(d.metric == "mrr@3" for d in found) == 1 * 3
    for metric, subset in {(d.metric, d.subset) for d in found}:
        family = [i for i, d in enumerate(found) if (d.metric, d.subset) == (metric, subset)]
        assert [held[i] for i in family] == holm([found[i].p_value for i in family])


def test_the_randomization_test_is_two_sided():
    # Ten differences: every one of the 2^10 sign vectors enumerated gives the exact two-sided p-value, which the
    # 10,000 random ones must approach (a one-sided test would give about half of it).
    diffs = np.array([-3.0, -2.0, -2.0, -1.0, -1.0, -1.0, 1.0, -4.0, 2.0, -1.5])
    signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * len(diffs))).reshape(len(diffs), -1).T
    exact = float(np.mean(np.abs(signs @ diffs) >= abs(diffs.sum()) - 1e-9))
    assert 0.05 < exact < 0.2
    assert randomization_p(diffs) == pytest.approx(exact, abs=0.015)
    assert randomization_p(-diffs) == pytest.approx(exact, abs=0.015)


def _small_records(rows: list[tuple[str, str, str, bool | None, int | None]]):
    method, subset, ids, nm, rank = (list(c) for c in zip(*rows, strict=True))
    return pa.table({"method": method, "subset": subset, "id": ids,
                     "number_match": pa.array(nm, pa.bool_()), "gold_rank": pa.array(rank, pa.int64())})  # fmt: skip


def test_only_the_questions_both_scored_are_paired():
    # A scored q1..q4, B only q1..q3: the pairs are q1..q3, and A's q4 (right, rank 1) counts nowhere.
    records = _small_records(
        [("a", "FinQA", "q1", True, 1), ("a", "FinQA", "q2", True, 2), ("a", "FinQA", "q3", False, 0),
         ("a", "FinQA", "q4", True, 1),
         ("b", "FinQA", "q1", False, 3), ("b", "FinQA", "q2", True, 1), ("b", "FinQA", "q3", False, 1),
         ("b", "FinQA", "q5", True, 1)]
    )  # fmt: skip
    rows = {(d.metric, d.subset): d for d in compare(records, "a", records, "b", ["number_match", "mrr@3"])}
    nm = rows[("number_match", "weighted")]
    assert nm.questions == 3
    assert nm.a == pytest.approx(200 / 3, abs=1e-3) and nm.b == pytest.approx(100 / 3, abs=1e-3)
    assert nm.p_value == pytest.approx(binomtest(1, 1, 0.5).pvalue)
    mrr = rows[("mrr@3", "weighted")]
    # a: 1, 1/2, 0 (gold not in its ranking); b: 1/3, 1, 1
    assert mrr.questions == 3 and mrr.a == pytest.approx(50.0) and mrr.b == pytest.approx(700 / 9, abs=1e-3)
