"""The one place records become numbers (t2rag.run_folder.scorecards): summaries from records, as runs, reports and
`t2rag score` make them, and the Number Match intervals in them (the Wilson score interval from the counts, per subset
and pooled)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from t2rag.metrics import gold_ranks, number_match
from t2rag.run_folder.records import to_records
from t2rag.run_folder.scorecards import (
    NM_INTERVAL,
    SubsetTotals,
    generation_usage,
    metric_values,
    ordered_subsets,
    scorecard_from_totals,
    scorecards_of,
    weighted_average,
    wilson_interval,
)


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [
        (0, 10, [0.0, 27.75]),  # 3.8415 / 13.8415: the upper end is z^2 / (n + z^2) at zero successes
        (10, 10, [72.25, 100.0]),
        (5, 10, [23.66, 76.34]),
        (1, 4, [4.56, 69.94]),
    ],
)
def test_wilson_interval_hand_worked(successes, trials, expected):
    assert wilson_interval(successes, trials) == pytest.approx(expected, abs=0.01)


def test_interval_narrows_with_the_sample_and_holds_the_estimate():
    widths = []
    for n in (10, 40, 160, 640):
        low, high = wilson_interval(n // 4, n)
        assert low < 25.0 < high
        widths.append(high - low)
    assert widths == sorted(widths, reverse=True)
    assert widths[-1] < 7.0 < widths[1]  # 640 answers: about +-3.4 points; 40: about +-13


def test_no_trials_gives_no_interval():
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_scorecard_carries_intervals_per_subset_and_pooled_over_subsets():
    totals = {
        "FinQA": SubsetTotals(questions=30, generated=20, matched=5),
        "TAT-DQA": SubsetTotals(questions=30, generated=20, matched=15),
    }
    scorecard = scorecard_from_totals(totals, ())
    assert scorecard["subsets"]["FinQA"][NM_INTERVAL] == wilson_interval(5, 20)
    assert scorecard["subsets"]["TAT-DQA"][NM_INTERVAL] == wilson_interval(15, 20)
    assert scorecard["weighted"]["number_match"] == 50.0
    assert scorecard["weighted"][NM_INTERVAL] == wilson_interval(20, 40)  # the pooled counts, not an average


def test_no_interval_where_nothing_was_generated():
    scorecard = scorecard_from_totals({"FinQA": SubsetTotals(questions=3, generated=0, retrieved=3)}, ("mrr@3",))
    assert NM_INTERVAL not in scorecard["subsets"]["FinQA"] and NM_INTERVAL not in scorecard["weighted"]


def test_wilson_interval_of_one_trial_and_its_rounding():
    """Exact values, rounded to two decimals: one trial, either outcome, and a z of the caller's."""
    assert wilson_interval(0, 1) == [0.0, 79.35]
    assert wilson_interval(1, 1) == [20.65, 100.0]
    assert wilson_interval(1, 3) == [6.15, 79.23]
    assert wilson_interval(1, 3, z=1.0) == [13.56, 61.44]
    assert all(math.isnan(v) for v in wilson_interval(1, -1))


def test_the_weighted_average_weights_each_metric_by_its_own_count_and_skips_nan():
    per_subset = {
        "FinQA": {"questions": 10, "generated": 2, "number_match": 100.0, "non_numeric_references": 1,
                  "retrieved": 10, "mrr@3": float("nan"), NM_INTERVAL: [1.0, 2.0]},
        "TAT-DQA": {"questions": 30, "generated": 6, "number_match": 0.0, "non_numeric_references": 2,
                    "retrieved": 20, "mrr@3": 50.0, NM_INTERVAL: [3.0, 4.0]},
        "ConvFinQA": {"questions": 5},  # no metric at all
    }  # fmt: skip
    out = weighted_average(per_subset)
    assert out == {"questions": 45, "generated": 8, "retrieved": 30, "number_match": 25.0,
                   "non_numeric_references": 3, "mrr@3": 50.0}  # fmt: skip
    only_nan = weighted_average({"A": {"questions": 3, "retrieved": 3, "recall@1": float("nan")}})
    assert math.isnan(only_nan["recall@1"]) and only_nan["retrieved"] == 3
    # Without a count of its own, a metric is weighted by the subset's questions.
    assert weighted_average({"A": {"questions": 1, "x": 10.0}, "B": {"questions": 3, "x": 30.0}})["x"] == 25.0
    assert weighted_average({"A": {"questions": 3, "x": 1 / 3}})["x"] == 0.3333  # four decimals


def test_subset_entries_and_the_order_of_subsets():
    totals = SubsetTotals(questions=9, generated=3, matched=1, non_numeric=2, retrieved=6,
                          metric_sums={"mrr@3": 2.0})  # fmt: skip
    assert totals.entry(("mrr@3", "recall@1")) == {
        "questions": 9, "generated": 3, "number_match": 33.3333, NM_INTERVAL: wilson_interval(1, 3),
        "non_numeric_references": 2, "retrieved": 6, "mrr@3": 33.3333, "recall@1": 0.0,
    }  # fmt: skip
    assert SubsetTotals(questions=2).entry(("mrr@3",)) == {"questions": 2}
    assert math.isnan(SubsetTotals(questions=2, generated=0).entry(())["number_match"])
    assert ordered_subsets(["Zeta", "TAT-DQA", "Alpha", "FinQA", "ConvFinQA"]) == [
        "FinQA", "ConvFinQA", "TAT-DQA", "Alpha", "Zeta"]  # fmt: skip


def test_groups_no_question_took_part_in_are_dropped():
    scorecard = scorecard_from_totals(
        {"FinQA": SubsetTotals(questions=4, generated=0, retrieved=4, metric_sums={"mrr@3": 2.0})}, ("mrr@3",)
    )
    assert scorecard["subsets"]["FinQA"] == {"questions": 4, "retrieved": 4, "mrr@3": 50.0}
    assert scorecard["weighted"] == {"questions": 4, "retrieved": 4, "mrr@3": 50.0}
    answered = scorecard_from_totals(
        {"FinQA": SubsetTotals(questions=4, generated=4, matched=1, retrieved=0)}, ("mrr@3",)
    )
    assert answered["weighted"] == {"questions": 4, "generated": 4, "number_match": 25.0,
                                    "non_numeric_references": 0, NM_INTERVAL: wilson_interval(1, 4)}  # fmt: skip
    assert answered["subsets"]["FinQA"] == {
        "questions": 4, "generated": 4, "number_match": 25.0, NM_INTERVAL: wilson_interval(1, 4),
        "non_numeric_references": 0}  # fmt: skip


def _records(subsets, ranks=None, predictions=None, references=None) -> pa.Table:
    n = len(subsets)
    columns: dict[str, object] = {"id": [f"q{i}" for i in range(n)], "subset": list(subsets), "method": ["m"] * n}
    if ranks is not None:
        columns["gold_rank"] = pa.array(np.asarray(ranks, dtype=np.int32))
    if predictions is not None:
        columns["number_match"] = pa.array(number_match(predictions, references))
        columns["reference"] = pa.array(references, pa.float64(), from_pandas=True)
    return to_records(pa.table(columns))


def test_weighted_average_is_question_weighted():
    subsets = ["FinQA"] * 3 + ["TAT-DQA"]
    preds = np.array([1.0, 2.0, np.nan, 5.0])
    refs = np.array([1.0, 3.0, 1.0, 5.0])
    out = scorecards_of(_records(subsets, [1, 0, 0, 1], preds, refs), ("recall@1",))["m"]
    assert out["subsets"]["FinQA"]["recall@1"] == pytest.approx(100 / 3, abs=1e-3)
    assert out["subsets"]["TAT-DQA"]["recall@1"] == 100.0
    assert out["weighted"]["recall@1"] == pytest.approx(50.0)  # (3 * 33.33 + 1 * 100) / 4, not (33.33 + 100) / 2
    assert out["weighted"]["number_match"] == pytest.approx(50.0)
    assert out["weighted"]["questions"] == 4


def test_real_sample_perfect_and_second_place_retrieval(sample):
    table = sample.scored()
    gold = table.column("context_id").to_pylist()
    subsets = table.column("subset").to_pylist()
    perfect = scorecards_of(_records(subsets, gold_ranks([[g, "other"] for g in gold], gold)))["m"]
    assert perfect["weighted"]["mrr@3"] == 100.0 and perfect["subsets"]["FinQA"]["retrieved"] == 883
    assert "number_match" not in perfect["weighted"]  # nothing was generated
    second = scorecards_of(_records(subsets, gold_ranks([["other", g] for g in gold], gold)))["m"]
    assert second["weighted"]["mrr@3"] == 50.0 and second["weighted"]["recall@1"] == 0.0


def _generated(rows: list[tuple]) -> pa.Table:
    """Records of (method, subset, number_match, prompt_tokens, cached_prompt_tokens, gold_rank, reference)."""
    method, subset, nm, prompt, cached, rank, reference = (list(c) for c in zip(*rows, strict=True))
    return pa.table({"method": method, "subset": subset, "number_match": pa.array(nm, pa.bool_()),
                     "prompt_tokens": pa.array(prompt, pa.int32()),
                     "cached_prompt_tokens": pa.array(cached, pa.int32()), "gold_rank": pa.array(rank, pa.int32()),
                     "reference": pa.array(reference, pa.float64())})  # fmt: skip


USAGE = [
    ("oracle", "FinQA", True, 300, 200, None, 1.0),
    ("oracle", "FinQA", False, 100, None, None, 2.0),  # an engine that does not say what it reused
    ("oracle", "TAT-DQA", False, None, None, None, None),  # no token count: counts as 0
    ("bm25", "FinQA", None, 999, 999, 1, 3.0),  # not generated: left out
    ("bm25", "TAT-DQA", True, 400, None, 2, 4.0),
]


def test_generation_usage_counts_the_prompt_tokens_of_generated_records():
    usage = generation_usage(_generated(USAGE))
    assert usage == {
        "oracle": {
            "subsets": {
                "FinQA": {"prompt_tokens": 400, "cached_prompt_tokens": 200, "cached_share": 66.67},
                "TAT-DQA": {"prompt_tokens": 0, "cached_prompt_tokens": None, "cached_share": None},
            },
            "all": {"prompt_tokens": 400, "cached_prompt_tokens": 200, "cached_share": 66.67},
        },
        "bm25": {
            "subsets": {"TAT-DQA": {"prompt_tokens": 400, "cached_prompt_tokens": None, "cached_share": None}},
            "all": {"prompt_tokens": 400, "cached_prompt_tokens": None, "cached_share": None},
        },
    }
    assert generation_usage(_generated(USAGE[3:4])) == {}  # nothing generated
    one = generation_usage(_generated(USAGE[:1]))["oracle"]["all"]
    assert one == {"prompt_tokens": 300, "cached_prompt_tokens": 200, "cached_share": 66.67}


def test_metric_values_per_record():
    values = metric_values(_generated(USAGE), ("mrr@3", "recall@1"))
    assert values.column("generated").to_pylist() == [1, 1, 1, 0, 1]
    assert values.column("matched").to_pylist() == [1, 0, 0, 0, 1]
    assert values.column("non_numeric").to_pylist() == [0, 0, 1, 0, 0]  # generated, with no numeric reference
    assert values.column("retrieved").to_pylist() == [0, 0, 0, 1, 1]
    assert values.column("mrr@3").to_pylist() == [0.0, 0.0, 0.0, 1.0, 0.5]
    assert values.column("recall@1").to_pylist() == [0.0, 0.0, 0.0, 1.0, 0.0]
    assert {values.schema.field(c).type for c in ("generated", "matched", "non_numeric", "retrieved")} == {pa.int64()}


def test_the_family_yardsticks_in_scorecards_from_hand_counted_records():
    """EM and F1 over the answers with an original answer, execution accuracy over every answer, each rate with
    its Wilson interval, per subset and pooled, and the EM misses by kind summed."""
    rows = [
        # subset, number_match, em, f1, em_error, exe_acc
        ("FinQA", True, 1.0, 1.0, None, True),
        ("FinQA", True, 0.0, 0.0, "scale", False),
        ("FinQA", False, None, None, None, False),  # no original answer: no EM or F1
        ("TAT-DQA", True, 0.0, 0.0, "sign", False),
        ("TAT-DQA", False, 0.0, 0.5, None, False),
        ("TAT-DQA", True, 1.0, 1.0, None, True),
        ("TAT-DQA", True, 0.0, 0.0, "scale_sign", True),
    ]
    subset, nm, em, f1, error, exe = (list(c) for c in zip(*rows, strict=True))
    n = len(rows)
    records = to_records(pa.table({"id": [str(i) for i in range(n)], "subset": subset, "method": ["m"] * n,
                                   "number_match": nm, "em": em, "f1": f1, "em_error": error, "exe_acc": exe,
                                   "reference": [1.0] * n}))  # fmt: skip
    card = scorecards_of(records)["m"]
    finqa, tat, weighted = card["subsets"]["FinQA"], card["subsets"]["TAT-DQA"], card["weighted"]
    assert (finqa["em_scored"], finqa["em"], finqa["f1"]) == (2, 50.0, 50.0)
    assert (finqa["exe_acc"], finqa["exe_acc_ci95"]) == (pytest.approx(100 / 3, abs=1e-3), wilson_interval(1, 3))
    assert (tat["em"], tat["f1"], tat["exe_acc"]) == (25.0, 37.5, 50.0)
    assert (tat["scale_errors"], tat["sign_errors"], tat["scale_sign_errors"]) == (0, 1, 1)
    assert (weighted["em_scored"], weighted["em"], weighted["f1"]) == (6, pytest.approx(200 / 6, abs=1e-3),
                                                                       pytest.approx(250 / 6, abs=1e-3))  # fmt: skip
    assert weighted["em_ci95"] == wilson_interval(2, 6)
    assert weighted["exe_acc_ci95"] == wilson_interval(3, 7)
    assert (weighted["scale_errors"], weighted["sign_errors"], weighted["scale_sign_errors"]) == (1, 1, 1)


def test_undecided_percent_readings_are_counted_and_em_pooled_both_ways():
    """Where the percent rule could not decide, the scorecard counts those answers and gives EM with them read in
    percent points beside EM as written, per subset and pooled (a subset without such answers counts its EM)."""
    rows = [
        # subset, em, percent_reading, em_if_percent
        ("FinQA", 1.0, None, None),
        ("FinQA", 0.0, None, None),
        ("TAT-DQA", 0.0, "undecided", 1.0),
        ("TAT-DQA", 1.0, "undecided", 0.0),
        ("TAT-DQA", 0.0, "undecided", 1.0),
        ("TAT-DQA", 1.0, "percent", None),
    ]
    subset, em, reading, if_percent = (list(c) for c in zip(*rows, strict=True))
    n = len(rows)
    records = to_records(pa.table({"id": [str(i) for i in range(n)], "subset": subset, "method": ["m"] * n,
                                   "number_match": [True] * n, "em": em, "f1": em, "percent_reading": reading,
                                   "em_if_percent": if_percent, "reference": [1.0] * n}))  # fmt: skip
    card = scorecards_of(records)["m"]
    finqa, tat, weighted = card["subsets"]["FinQA"], card["subsets"]["TAT-DQA"], card["weighted"]
    assert "percent_undecided" not in finqa and "em_if_percent" not in finqa
    assert (tat["em"], tat["percent_undecided"], tat["em_if_percent"]) == (50.0, 3, 75.0)  # 2/4 and 3/4
    assert (weighted["em"], weighted["percent_undecided"]) == (50.0, 3)  # 3/6
    assert weighted["em_if_percent"] == pytest.approx(400 / 6, abs=1e-3)  # (1 + 3) / 6


def test_records_without_the_yardsticks_have_none_in_their_scorecards():
    records = to_records(pa.table({"id": ["1"], "subset": ["FinQA"], "method": ["m"], "number_match": [True]}))
    weighted = scorecards_of(records)["m"]["weighted"]
    assert weighted["number_match"] == 100.0
    assert not {"em", "f1", "exe_acc", "em_ci95", "exe_acc_ci95"} & set(weighted)


def test_a_run_scores_every_answer_by_each_yardstick(scripted_run, sample):
    """Every generated record of a real run has execution accuracy as FinQA's rounding gives it, and EM and F1
    wherever its question has an original answer; the scorecards are the counts of those columns."""
    from t2rag.run_folder.files import read_records

    records = read_records(scripted_run)
    answered = records.filter(pa.compute.is_valid(records.column("number_match"))).to_pylist()
    originals = dict(zip(sample.table.column("id").to_pylist(), sample.table.column("original_answer").to_pylist(),
                         strict=True))  # fmt: skip
    assert answered
    for r in answered:
        pred, ref = r["prediction"], r["reference"]
        assert r["exe_acc"] is (pred is not None and ref is not None and round(pred, 5) == round(ref, 5))
        assert (r["em"] is None) is (originals[r["id"]] is None)
    cards = scorecards_of(records)
    for method in {r["method"] for r in answered}:
        mine = [r for r in answered if r["method"] == method]
        scored = [r for r in mine if r["em"] is not None]
        weighted = cards[method]["weighted"]
        assert weighted["exe_acc"] == pytest.approx(100 * sum(r["exe_acc"] for r in mine) / len(mine), abs=1e-3)
        assert weighted["em"] == pytest.approx(100 * sum(r["em"] for r in scored) / len(scored), abs=1e-3)
        assert weighted["f1"] == pytest.approx(100 * sum(r["f1"] for r in scored) / len(scored), abs=1e-3)


def test_non_numeric_references_are_counted_among_the_answered_only():
    """A retrieval-only record (no Number Match verdict) with a non-numeric reference was not answered: it is not
    one of the answers whose reference could not be compared."""
    table = to_records(pa.table({
        "id": ["q0", "q1", "q2", "q3"], "subset": ["FinQA"] * 4, "method": ["m"] * 4,
        "gold_rank": pa.array([1, 1, 2, 1], pa.int32()),
        "number_match": pa.array([False, None, True, None], pa.bool_()),
        "reference": pa.array([None, None, 1.0, None], pa.float64()),
    }))  # fmt: skip
    entry = scorecards_of(table, ("recall@1",))["m"]["subsets"]["FinQA"]
    assert entry["non_numeric_references"] == 1
    assert entry["generated"] == 2
