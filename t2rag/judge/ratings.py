"""Elo ratings from a judge's verdicts, their intervals from resampling questions, and how often the judge agrees
with Number Match.

Each verdict is one game of a method against the baseline: a win scores 1, a tie 0.5, a loss 0; an unparsed verdict
is no game. The baseline's rating stays at 1000 (TableQuest fixes its baseline model's), so a method's rating is
the classic Elo update against a fixed opponent, game after game, in the order of (subset, question id, order asked):

    expected = 1 / (1 + 10 ** ((1000 - rating) / 400));  rating += k * (score - expected)

The 95% interval is the 2.5th and 97.5th percentile over `rounds` resamples of the questions (with replacement,
each resample's games in its drawn order). Agreement with Number Match is over the parsed verdicts where both
answers have a Number Match verdict: Number Match prefers the right answer when exactly one is right and calls it a
tie otherwise; Cohen's kappa corrects the share of agreement for chance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa

from t2rag.judge.config import BASELINE_RATING

SCORES = {"method": 1.0, "tie": 0.5, "baseline": 0.0}


def elo(scores: Sequence[float], k: float, start: float = BASELINE_RATING) -> float:
    """A rating after `scores` (1 win, 0.5 tie, 0 loss, in order) against an opponent fixed at the baseline's."""
    rating = start
    for score in scores:
        expected = 1.0 / (1.0 + 10.0 ** ((BASELINE_RATING - rating) / 400.0))
        rating += k * (score - expected)
    return rating


@dataclass(frozen=True)
class Rating:
    """One method's rating against the baseline over some questions."""

    rating: float
    ci95: list[float]
    games: int
    wins: int
    ties: int
    losses: int

    def as_dict(self) -> dict:
        return asdict(self)


def rate(games: Sequence[tuple[str, float]], k: float, rounds: int, seed: int) -> Rating:
    """The rating of `games`, (question key, score) in play order, with its bootstrap interval over questions."""
    scores = [s for _, s in games]
    keys = list(dict.fromkeys(q for q, _ in games))
    by_question: dict[str, list[float]] = {}
    for question, score in games:
        by_question.setdefault(question, []).append(score)
    rng = np.random.default_rng(seed)
    resampled = []
    for _ in range(rounds if keys else 0):
        drawn = rng.integers(0, len(keys), len(keys))
        resampled.append(elo([s for i in drawn for s in by_question[keys[i]]], k))
    low, high = np.percentile(resampled, [2.5, 97.5]).tolist() if resampled else [BASELINE_RATING] * 2
    return Rating(
        rating=round(elo(scores, k), 2),
        ci95=[round(low, 2), round(high, 2)],
        games=len(scores),
        wins=scores.count(1.0),
        ties=scores.count(0.5),
        losses=scores.count(0.0),
    )


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Cohen's kappa of two raters' labels of the same items; None without items or where chance agreement is
    certain (both always give one and the same label)."""
    n = len(first)
    if n == 0:
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    labels = set(first) | set(second)
    chance = sum((list(first).count(label) / n) * (list(second).count(label) / n) for label in labels)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def number_match_preference(method_right: bool, baseline_right: bool) -> str:
    """What Number Match says of a pair: the right answer when exactly one is right, else a tie."""
    if method_right != baseline_right:
        return "method" if method_right else "baseline"
    return "tie"


def ratings(verdicts: pa.Table, k: float, rounds: int, seed: int) -> dict:
    """Per judged method: its rating overall and per subset, unparsed verdicts, and agreement with Number Match.
    `verdicts` has `method`, `subset`, `id`, `order`, `winner` (method, baseline, tie or null when unparsed),
    `nm_method` and `nm_baseline` (and `choice`, the position it named: a judge that names one position whatever
    the answers has a `first_position_share` near 0 or 100)."""
    rows = sorted(verdicts.to_pylist(), key=lambda r: (r["method"], r["subset"], r["id"], r["order"]))
    out: dict = {}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        parsed = [r for r in mine if r["winner"] is not None]
        games = [(f"{r['subset']}\x1f{r['id']}", SCORES[r["winner"]]) for r in parsed]
        subsets = {}
        for subset in dict.fromkeys(r["subset"] for r in parsed):
            part = [(f"{r['subset']}\x1f{r['id']}", SCORES[r["winner"]]) for r in parsed if r["subset"] == subset]
            subsets[subset] = rate(part, k, rounds, seed).as_dict()
        both = [r for r in parsed if r["nm_method"] is not None and r["nm_baseline"] is not None]
        judged = [r["winner"] for r in both]
        matched = [number_match_preference(r["nm_method"], r["nm_baseline"]) for r in both]
        kappa = cohen_kappa(judged, matched)
        decided = [r for r in parsed if r["winner"] != "tie"]
        first = sum(r.get("choice") == "1" for r in decided)
        out[method] = {
            **rate(games, k, rounds, seed).as_dict(),
            "verdicts": len(mine),
            "unparsed": len(mine) - len(parsed),
            "first_position_share": round(100 * first / len(decided), 2) if decided else None,
            "subsets": subsets,
            "number_match_agreement": {
                "verdicts": len(both),
                "agree": round(100 * sum(a == b for a, b in zip(judged, matched, strict=True)) / len(both), 2)
                if both
                else None,
                "kappa": None if kappa is None else round(kappa, 4),
            },
        }
    return out


def ratings_table(result: dict) -> tuple[list[str], list[list[object]]]:
    """The ratings as rows: per judged method, overall and per subset, with games, outcomes and unparsed verdicts,
    and its agreement with Number Match (overall rows)."""
    header = ["method", "subset", "Elo", "95% CI", "games", "wins", "ties", "losses", "unparsed", "NM agreement %",
              "Cohen's kappa", "answer 1 chosen %"]  # fmt: skip
    rows: list[list[object]] = [[result["baseline"] + " (baseline)", "all", result["baseline_rating"], None, None,
                                 None, None, None, None, None, None, None]]  # fmt: skip
    for method, r in result["methods"].items():
        agreement = r["number_match_agreement"]
        rows.append([method, "all", r["rating"], r["ci95"], r["games"], r["wins"], r["ties"], r["losses"],
                     r["unparsed"], agreement["agree"], agreement["kappa"], r["first_position_share"]])  # fmt: skip
        for subset, s in r["subsets"].items():
            rows.append([method, subset, s["rating"], s["ci95"], s["games"], s["wins"], s["ties"], s["losses"],
                         None, None, None, None])  # fmt: skip
    return header, rows
