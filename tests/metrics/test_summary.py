"""Number Match intervals in summaries: the Wilson score interval from the counts, per subset and pooled."""

from __future__ import annotations

import math

import pytest

from t2rag.metrics.summary import NM_INTERVAL, SubsetTotals, summary_from_totals, wilson_interval


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


def test_summary_carries_intervals_per_subset_and_pooled_over_subsets():
    totals = {
        "FinQA": SubsetTotals(questions=30, generated=20, matched=5),
        "TAT-DQA": SubsetTotals(questions=30, generated=20, matched=15),
    }
    summary = summary_from_totals(totals, ())
    assert summary["subsets"]["FinQA"][NM_INTERVAL] == wilson_interval(5, 20)
    assert summary["subsets"]["TAT-DQA"][NM_INTERVAL] == wilson_interval(15, 20)
    assert summary["weighted"]["number_match"] == 50.0
    assert summary["weighted"][NM_INTERVAL] == wilson_interval(20, 40)  # the pooled counts, not an average


def test_no_interval_where_nothing_was_generated():
    summary = summary_from_totals({"FinQA": SubsetTotals(questions=3, generated=0, retrieved=3)}, ("mrr@3",))
    assert NM_INTERVAL not in summary["subsets"]["FinQA"] and NM_INTERVAL not in summary["weighted"]
