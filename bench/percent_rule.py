"""The percent rule (t2rag.metrics.percent_rule) measured on real golds: how it reads the questions whose golds
write their own scale (it should read every "%" gold as a percentage and no money or scaled gold as one), how many
bare-number golds it marks, and what EM the gold itself gets when given back as a fraction (t2rag's answer
convention for percentages) without the rule and with it.

Usage:
    python bench/percent_rule.py [--data SOURCE] [--split dev] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter

from t2rag.answer.numerals import parse_scaled
from t2rag.data import load_questions
from t2rag.metrics.percent_rule import READINGS, SCALE_DROPPED, percent_reading
from t2rag.metrics.tatqa import gold_spans, tatqa_score

#: How a gold writes its scale: a percent sign, money or a scale word, a bare number, or not one number at all.
GOLD_KINDS = ("percent sign", "money or scale word", "bare number", "not one number")
_BARE = re.compile(r"[\s0-9.,()+\-\u2212]+")


def gold_kind(original_answer: str) -> tuple[str, float | None]:
    """How the gold writes its scale, and its value as written (bare numbers only)."""
    spans = gold_spans(original_answer)
    scaled = parse_scaled(spans[0]) if len(spans) == 1 else None
    if scaled is None:
        return "not one number", None
    if "%" in spans[0]:
        return "percent sign", None
    if scaled[1] != 0 or not _BARE.fullmatch(spans[0]):
        return "money or scale word", None
    return "bare number", float(scaled[0])


def measure(data: str | None, split: str | None) -> dict:
    rows = load_questions(data, split=split).scored().select(["subset", "question", "original_answer"]).to_pylist()
    out: dict = {"subsets": sorted(SCALE_DROPPED & {r["subset"] for r in rows})}
    readings: Counter = Counter()
    before = after = marked = 0
    for row in rows:
        if row["subset"] not in SCALE_DROPPED or row["original_answer"] is None:
            continue
        kind, value = gold_kind(row["original_answer"])
        reading = percent_reading(row["question"])
        readings[(kind, reading)] += 1
        if kind == "bare number" and reading == "percent":
            marked += 1
            fraction = value / 100  # the gold given back as t2rag's prompt asks for a percentage
            before += tatqa_score(fraction, None, row["original_answer"]).em == 1
            after += tatqa_score(fraction, None, row["original_answer"], reading).em == 1
    out["questions"] = sum(readings.values())
    out["readings"] = {kind: {r: readings[(kind, r)] for r in READINGS} for kind in GOLD_KINDS}
    out["gold_as_fraction"] = {"marked": marked, "em_before": before, "em_after": after}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="the data source (default: the bundled sample)")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = measure(args.data, args.split)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{', '.join(result['subsets'])} {args.split}: {result['questions']} questions with a gold")
    print(f"| gold written as | {' | '.join(READINGS)} |")
    print(f"|---|{'--:|' * len(READINGS)}")
    for kind, counts in result["readings"].items():
        print(f"| {kind} | {' | '.join(str(counts[r]) for r in READINGS)} |")
    g = result["gold_as_fraction"]
    pct = (lambda n: f"{100 * n / g['marked']:.2f}%") if g["marked"] else (lambda n: "-")
    print(f"bare-number golds read as percentages: {g['marked']}; the gold given as a fraction scores EM 1 on "
          f"{g['em_before']} ({pct(g['em_before'])}) without the rule, {g['em_after']} ({pct(g['em_after'])}) "
          "with it")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
