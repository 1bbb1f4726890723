"""Elo ratings against a fixed baseline, their bootstrap intervals, and Cohen's kappa, each against values worked
out by hand from the formulas."""

from __future__ import annotations

import pyarrow as pa
import pytest

from t2rag.judge.ratings import cohen_kappa, elo, number_match_preference, ratings

# Three methods' verdicts against the baseline, in play order (K = 16, everyone starting at 1000):
# a: win, win, loss.  1000 + 16 * (1 - 0.5) = 1008;  E = 1 / (1 + 10^(-8/400)) = 0.511511,
#    1008 + 16 * 0.488489 = 1015.8158;  E = 1 / (1 + 10^(-15.8158/400)) = 0.522709,
#    1015.8158 - 16 * 0.522709 = 1007.4519
# b: tie, tie: the expected score is 0.5 at 1000, so a tie moves nothing: 1000.
# c: loss, an unparsed verdict (no game), loss.  1000 - 8 = 992;  E = 1 / (1 + 10^(8/400)) = 0.488489,
#    992 - 16 * 0.488489 = 984.1842
VERDICTS = [
    ("a", "q1", "method"), ("a", "q2", "method"), ("a", "q3", "baseline"),
    ("b", "q1", "tie"), ("b", "q2", "tie"),
    ("c", "q1", "baseline"), ("c", "q2", None), ("c", "q3", "baseline"),
]  # fmt: skip
HAND = {"a": 1007.4519, "b": 1000.0, "c": 984.1842}


def test_elo_of_one_sequence_is_the_hand_computed_one():
    assert elo([1.0, 1.0, 0.0], 16) == pytest.approx(HAND["a"], abs=1e-3)
    assert elo([0.5, 0.5], 16) == 1000.0
    assert elo([0.0, 0.0], 16) == pytest.approx(HAND["c"], abs=1e-3)


def test_ratings_of_three_methods_from_their_verdicts():
    table = pa.Table.from_pylist([
        {"method": m, "subset": "FinQA", "id": q, "order": "method_first", "winner": w, "nm_method": None,
         "nm_baseline": None} for m, q, w in VERDICTS
    ])  # fmt: skip
    found = ratings(table, k=16, rounds=200, seed=0)
    assert {m: round(r["rating"], 2) for m, r in found.items()} == {m: round(v, 2) for m, v in HAND.items()}
    assert (found["a"]["wins"], found["a"]["losses"], found["a"]["games"]) == (2, 1, 3)
    assert (found["c"]["unparsed"], found["c"]["games"], found["c"]["verdicts"]) == (1, 2, 3)
    for r in found.values():
        low, high = r["ci95"]
        assert low <= r["rating"] + 1e-6 and r["rating"] - 1e-6 <= high
    assert found["b"]["ci95"] == [1000.0, 1000.0]  # ties only: every resample stays at 1000
    assert found["a"]["subsets"]["FinQA"]["rating"] == found["a"]["rating"]


def test_cohen_kappa_hand_worked():
    judge = ["method", "method", "baseline", "tie", "method", "baseline"]
    number_match = ["method", "tie", "baseline", "tie", "baseline", "baseline"]
    # observed 4/6; chance 3/6 * 1/6 + 2/6 * 3/6 + 1/6 * 2/6 = 11/36; kappa = (24/36 - 11/36) / (25/36) = 0.52
    assert cohen_kappa(judge, number_match) == pytest.approx(0.52)
    assert cohen_kappa(judge, judge) == pytest.approx(1.0)
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["tie", "tie"], ["tie", "tie"]) is None  # chance agreement is certain


def test_number_match_prefers_the_right_answer_and_else_calls_a_tie():
    assert number_match_preference(True, False) == "method"
    assert number_match_preference(False, True) == "baseline"
    assert number_match_preference(True, True) == number_match_preference(False, False) == "tie"
