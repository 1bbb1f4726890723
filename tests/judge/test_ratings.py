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


def _elo_by_hand(scores: list[float], k: float, rating: float = 1000.0) -> float:
    """The Elo update against an opponent fixed at 1000, written out again from its definition."""
    for score in scores:
        rating = rating + k * (score - 1 / (1 + 10 ** ((1000 - rating) / 400)))
    return rating


def test_every_figure_of_a_method_s_ratings_by_hand():
    """Games in (subset, question id, order) order whatever the table's order; per-subset ratings of their own
    games; agreement with Number Match over the parsed verdicts where both answers have a verdict; the share of
    decided verdicts that chose answer 1."""
    rows = [
        # subset, id, order, winner, nm_method, nm_baseline, choice
        ("TAT-DQA", "q5", "method_first", "method", None, True, "1"),  # no NM verdict for the method's answer
        ("FinQA", "q3", "method_first", "baseline", True, False, "2"),  # NM prefers the method: they disagree
        ("FinQA", "q1", "method_first", "method", True, False, "1"),  # NM prefers the method: they agree
        ("FinQA", "q1", "baseline_first", "baseline", False, False, "1"),  # NM: a tie, they disagree
        ("FinQA", "q2", "method_first", "tie", True, True, None),  # NM: a tie, they agree
        ("FinQA", "q4", "method_first", None, True, False, None),  # unparsed: no game
    ]
    table = pa.Table.from_pylist([
        {"method": "m", "subset": s, "id": q, "order": o, "winner": w, "nm_method": a, "nm_baseline": b, "choice": c}
        for s, q, o, w, a, b, c in rows
    ])  # fmt: skip
    found = ratings(table, k=32, rounds=50, seed=1)["m"]
    # play order: FinQA q1 baseline_first (loss), q1 method_first (win), q2 (tie), q3 (loss), then TAT-DQA q5 (win)
    assert found["rating"] == round(_elo_by_hand([0, 1, 0.5, 0, 1], 32), 2)
    assert (found["games"], found["wins"], found["ties"], found["losses"]) == (5, 2, 1, 2)
    assert (found["verdicts"], found["unparsed"]) == (6, 1)
    assert found["subsets"]["FinQA"]["rating"] == round(_elo_by_hand([0, 1, 0.5, 0], 32), 2)
    assert found["subsets"]["TAT-DQA"]["rating"] == round(_elo_by_hand([1], 32), 2) == 1016.0
    assert list(found["subsets"]) == ["FinQA", "TAT-DQA"]
    assert found["subsets"]["TAT-DQA"]["ci95"] == [1016.0, 1016.0]  # one question: every resample is it
    # NM agreement over q1 (twice), q2, q3: judge (baseline, method, tie, baseline), NM (tie, method, tie, method):
    # 2 of 4 agree; chance: baseline 2/4 x 0 + method 1/4 x 2/4 + tie 1/4 x 2/4 = 1/4; kappa (1/2 - 1/4) / (3/4)
    assert found["number_match_agreement"] == {"verdicts": 4, "agree": 50.0, "kappa": round(1 / 3, 4)}
    # decided verdicts (not ties, parsed): q5 "1", q3 "2", q1 "1", q1 "1": 3 of 4 chose answer 1
    assert found["first_position_share"] == 75.0


def test_a_method_with_no_parsed_verdict_has_no_shares():
    row = {"method": "m", "subset": "FinQA", "id": "q1", "order": "method_first", "winner": None, "nm_method": True,
           "nm_baseline": True, "choice": None}  # fmt: skip
    table = pa.Table.from_pylist([row])
    found = ratings(table, k=16, rounds=10, seed=0)["m"]
    assert (found["rating"], found["ci95"], found["games"]) == (1000.0, [1000.0, 1000.0], 0)
    assert found["first_position_share"] is None and found["subsets"] == {}
    assert found["number_match_agreement"] == {"verdicts": 0, "agree": None, "kappa": None}


def test_the_interval_is_the_middle_95_percent_of_the_resampled_ratings():
    """Two questions, a win and a loss (K = 16): a resample draws win-win (1015.8158), loss-loss (984.1842) or one
    of each (999.8158, 1000.1842), win-win and loss-loss each a quarter of the time, so over 400 resamples the 2.5th
    percentile is loss-loss's rating and the 97.5th win-win's."""
    from t2rag.judge.ratings import rate

    found = rate([("q1", 1.0), ("q2", 0.0)], k=16, rounds=400, seed=3)
    assert found.ci95 == [round(_elo_by_hand([0, 0], 16), 2), round(_elo_by_hand([1, 1], 16), 2)]
    assert found.rating == round(_elo_by_hand([1, 0], 16), 2) == 999.82
    assert (found.games, found.wins, found.ties, found.losses) == (2, 1, 0, 1)


def test_elo_starts_where_it_is_told():
    assert elo([], 16, start=1234.5) == 1234.5
    assert elo([1.0], 10, start=1000.0) == 1005.0  # 1000 + 10 x (1 - 0.5)
    assert elo([0.0], 10, start=1400.0) == pytest.approx(1400 - 10 / (1 + 10 ** (-1)), abs=1e-9)


def test_the_ratings_table_rows():
    from t2rag.judge.ratings import ratings_table

    result = {"baseline": "oracle", "baseline_rating": 1000.0, "methods": {"m": {
        "rating": 1010.0, "ci95": [990.0, 1030.0], "games": 3, "wins": 2, "ties": 0, "losses": 1, "unparsed": 1,
        "first_position_share": 50.0, "number_match_agreement": {"verdicts": 3, "agree": 66.67, "kappa": 0.25},
        "subsets": {"FinQA": {"rating": 1008.0, "ci95": [1000.0, 1016.0], "games": 1, "wins": 1, "ties": 0,
                              "losses": 0}}}}}  # fmt: skip
    header, rows = ratings_table(result)
    assert header == ["method", "subset", "Elo", "95% CI", "games", "wins", "ties", "losses", "unparsed",
                      "NM agreement %", "Cohen's kappa", "answer 1 chosen %"]  # fmt: skip
    assert rows == [
        ["oracle (baseline)", "all", 1000.0, None, None, None, None, None, None, None, None, None],
        ["m", "all", 1010.0, [990.0, 1030.0], 3, 2, 0, 1, 1, 66.67, 0.25, 50.0],
        ["m", "FinQA", 1008.0, [1000.0, 1016.0], 1, 1, 0, 0, None, None, None, None],
    ]


def test_shares_are_kept_to_2_decimals():
    """One decided verdict of three chose answer 1 (33.33%); Number Match agrees with two of three (66.67%)."""
    rows = [
        ("q1", "method", True, False, "1"),  # NM: method; agree
        ("q2", "baseline", False, True, "2"),  # NM: baseline; agree
        ("q3", "method", False, True, "2"),  # NM: baseline; disagree
    ]
    table = pa.Table.from_pylist([
        {"method": "m", "subset": "FinQA", "id": q, "order": "method_first", "winner": w, "nm_method": a,
         "nm_baseline": b, "choice": c} for q, w, a, b, c in rows
    ])  # fmt: skip
    found = ratings(table, k=16, rounds=10, seed=0)["m"]
    assert found["first_position_share"] == 33.33
    # judge (method, baseline, method), NM (method, baseline, baseline): observed 2/3; chance method 2/3 x 1/3 +
    # baseline 1/3 x 2/3 = 4/9; kappa (6/9 - 4/9) / (5/9) = 0.4
    assert found["number_match_agreement"] == {"verdicts": 3, "agree": 66.67, "kappa": 0.4}


def test_kappa_refuses_two_raters_of_different_items():
    with pytest.raises(ValueError):
        cohen_kappa(["tie", "tie"], ["tie"])


def test_the_interval_is_reproducible_by_its_seed():
    """The same seed draws the same resamples, so the same interval; the interval over questions of mixed outcomes
    moves with the seed."""
    from t2rag.judge.ratings import rate

    games = [(f"q{i}", [1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.0, 0.0][i]) for i in range(8)]
    first = [rate(games, k=32, rounds=30, seed=5).ci95 for _ in range(2)]
    assert first[0] == first[1]
    others = {tuple(rate(games, k=32, rounds=30, seed=s).ci95) for s in range(6)}
    assert len(others) > 1
    table = pa.Table.from_pylist([
        {"method": "m", "subset": "FinQA", "id": q, "order": "method_first",
         "winner": {1.0: "method", 0.5: "tie", 0.0: "baseline"}[s], "nm_method": None, "nm_baseline": None}
        for q, s in games
    ])  # fmt: skip
    found = [ratings(table, k=32, rounds=30, seed=5)["m"] for _ in range(2)]
    assert found[0]["ci95"] == found[1]["ci95"] == first[0]
    assert found[0]["subsets"]["FinQA"]["ci95"] == first[0]
