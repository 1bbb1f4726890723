"""Paired tests: McNemar against scipy's binomial test on discordant pairs counted from a real run's records, the
randomization test at its two extremes, intervals and Holm's correction."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from scipy.stats import binomtest

from t2rag.results.significance import (
    ROUNDS,
    Difference,
    compare,
    diff_interval,
    holm,
    is_binary,
    mcnemar_p,
    pairwise,
    randomization_p,
    significant,
)
from t2rag.run_folder.files import read_records
from t2rag.run_folder.scorecards import scorecards_of


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


# Two subsets, three methods, on records built here (mutation testing runs these without the scripted run).
PAIRED = [
    ("a", "FinQA", "q1", True, 1), ("a", "FinQA", "q2", True, 2), ("a", "FinQA", "q3", False, 0),
    ("a", "TAT-DQA", "t1", True, 1), ("a", "TAT-DQA", "t2", True, 1), ("a", "TAT-DQA", "t3", True, 3),
    ("b", "FinQA", "q1", False, 3), ("b", "FinQA", "q2", True, 1), ("b", "FinQA", "q3", False, 1),
    ("b", "TAT-DQA", "t1", False, 0), ("b", "TAT-DQA", "t2", False, 2), ("b", "TAT-DQA", "t3", True, 1),
    ("c", "FinQA", "q1", True, 1), ("c", "FinQA", "q2", True, 1),
]  # fmt: skip


def test_each_difference_on_small_records_field_by_field():
    records = _small_records(PAIRED)
    found = compare(records, "a", records, "b", ["number_match", "recall@1", "mrr@3"])
    rows = {(d.metric, d.subset): d for d in found}
    assert [(d.metric, d.subset) for d in found] == [
        (m, s) for m in ("number_match", "recall@1", "mrr@3") for s in ("FinQA", "TAT-DQA", "weighted")
    ]
    assert {d.method for d in found} == {"a vs b"} and {d.questions for d in found if d.subset != "weighted"} == {3}
    nm = rows[("number_match", "FinQA")]  # a: right, right, wrong; b: wrong, right, wrong
    assert nm.as_dict() == {"method": "a vs b", "subset": "FinQA", "metric": "number_match", "a": 66.6667,
                            "b": 33.3333, "diff": 33.3333, "ci95": nm.ci95, "p_value": 1.0, "test": "mcnemar_exact",
                            "questions": 3}  # fmt: skip
    diffs = np.array([100.0, 0.0, 0.0])
    half = 1.959964 * diffs.std(ddof=1) / np.sqrt(3)
    assert nm.ci95 == [round(33.333333 - half, 4), round(33.333333 + half, 4)]
    tat = rows[("number_match", "TAT-DQA")]  # a right three times, b once: two discordant pairs, both a's
    assert (tat.a, tat.b, tat.diff) == (100.0, 33.3333, 66.6667)
    assert tat.p_value == pytest.approx(binomtest(2, 2, 0.5).pvalue) and tat.p_value < 1.0
    weighted = rows[("number_match", "weighted")]
    assert weighted.questions == 6 and weighted.p_value == pytest.approx(binomtest(3, 3, 0.5).pvalue)
    recall = rows[("recall@1", "FinQA")]  # ranks 1, 2, 0 against 3, 1, 1
    assert (recall.a, recall.b, recall.test) == (33.3333, 66.6667, "mcnemar_exact")
    assert recall.p_value == pytest.approx(binomtest(1, 3, 0.5).pvalue)
    mrr = rows[("mrr@3", "TAT-DQA")]  # a: 1, 1, 1/3; b: 0, 1/2, 1
    assert mrr.test == "paired_randomization" and (mrr.a, mrr.b) == (77.7778, 50.0) and mrr.diff == 27.7778
    assert 0 < mrr.p_value <= 1 and mrr.p_value == randomization_p(np.array([100.0, 50.0, -200 / 3]))


def test_a_pair_is_labelled_by_its_methods_or_as_asked():
    records = _small_records(PAIRED)
    assert {d.method for d in compare(records, "a", records, "a", ["mrr@3"])} == {"a"}
    assert {d.method for d in compare(records, "a", records, "b", ["mrr@3"], label="run1 vs run2")} == {"run1 vs run2"}
    assert compare(records, "a", records, "nobody", ["mrr@3"]) == []


def test_only_recall_and_number_match_are_right_or_wrong():
    assert is_binary("number_match") and is_binary("recall@1") and is_binary("recall@10")
    assert not is_binary("mrr@3") and not is_binary("ndcg@5")


def test_pairwise_is_every_earlier_method_against_every_later_one():
    records = _small_records(PAIRED)
    found = pairwise(records, ["a", "b", "c"], ["number_match", "mrr@3"])
    assert list(dict.fromkeys(d.method for d in found)) == ["a vs b", "a vs c", "b vs c"]
    for first, second in (("a", "b"), ("a", "c"), ("b", "c")):
        mine = [d for d in found if d.method == f"{first} vs {second}"]
        assert mine == compare(records, first, records, second, ["number_match", "mrr@3"])
    assert {d.questions for d in found if d.method == "a vs c" and d.subset == "weighted"} == {2}  # c has q1, q2


def _difference(metric: str, subset: str, p: float) -> Difference:
    return Difference("x vs y", subset, metric, 0.0, 0.0, 0.0, [0.0, 0.0], p, "mcnemar_exact", 10)


def test_holm_families_are_one_metric_on_one_subset_row():
    found = [_difference("number_match", "FinQA", 0.01), _difference("number_match", "FinQA", 0.03),
             _difference("number_match", "weighted", 0.03), _difference("mrr@3", "FinQA", 0.04),
             _difference("number_match", "FinQA", 0.2)]  # fmt: skip
    # number_match/FinQA: 0.01 <= .05/3 holds, 0.03 > .05/2 fails; the other two are families of one: p <= .05.
    assert significant(found) == [True, False, True, True, False]
    assert significant(found, alpha=0.02) == [False, False, False, False, False]
    assert significant([]) == []


def test_holm_rejects_a_p_equal_to_its_threshold():
    assert holm([0.025, 0.05]) == [True, True]
    assert holm([0.05 + 1e-12]) == [False]


def test_randomization_p_counts_every_round_and_the_observed_one():
    # One nonzero difference: every sign vector is as extreme as the observed one, so p is exactly 1, for any
    # number of rounds (a round miscounted moves it off 1).
    for rounds in (10, 1_000, 1_500, ROUNDS):
        assert randomization_p(np.array([0.0, 5.0, 0.0]), rounds=rounds) == 1.0
    assert randomization_p(np.array([2.0, -2.0, 0.0])) == 1.0  # a zero mean: every sign vector is as extreme
    diffs = np.array([3.0, 2.0, 2.0, 1.0, -1.0, 1.0, 1.0, -4.0, 2.0, 1.5])
    p = randomization_p(diffs)
    assert p == randomization_p(diffs) and p == randomization_p(diffs, seed=0)  # seeded: the same every time
    assert p * (ROUNDS + 1) == pytest.approx(round(p * (ROUNDS + 1)))  # (extreme + 1) / (rounds + 1)


def test_an_interval_needs_two_differences():
    assert diff_interval(np.array([4.0])) == [4.0, 4.0]
    low, high = diff_interval(np.array([0.0, 100.0]))
    assert low < 50.0 < high and high - 50.0 == pytest.approx(1.959964 * np.std([0.0, 100.0], ddof=1) / np.sqrt(2))
