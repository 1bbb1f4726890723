"""The answer-parsing stage with and without its optional columns."""

from __future__ import annotations

import json

import pyarrow as pa

from t2rag.config import RunConfig
from t2rag.resources import Resources
from t2rag.stages.answer import ParseAnswers

ANSWER = json.dumps({"reasoning_steps": ["(150 - 120) / 120"], "final_formula": "(150 - 120) / 120",
                     "computed_formula": "0.25"})  # fmt: skip


def parse(batch: pa.Table) -> pa.Table:
    return ParseAnswers(Resources(RunConfig(methods=["oracle"])))(batch)


def test_scores_against_the_reference_when_there_is_one() -> None:
    batch = pa.table({"raw_output": [ANSWER, ANSWER], "reference": [0.25, 7.0]})
    out = parse(batch)
    assert out.column("prediction").to_pylist() == [0.25, 0.25]
    assert out.column("number_match").to_pylist() == [True, False]


def test_parses_without_reference_or_table_and_scores_nothing() -> None:
    out = parse(pa.table({"raw_output": [ANSWER, "no json here"]}))
    assert out.column("prediction").to_pylist()[0] == 0.25
    assert out.column("json_ok").to_pylist() == [True, False]
    assert out.column("number_match").to_pylist() == [None, None]


def test_a_tatdqa_question_asking_a_percentage_reads_its_bare_gold_in_percent_points() -> None:
    """The same answer (0.25) against the same bare gold "25": right where a TAT-DQA question asks a percentage,
    wrong (a scale error) where it does not, and scored as written with both readings kept where the rule cannot
    tell; a FinQA question is never read (its release writes its percentages with a sign)."""
    questions = ["What was the percentage change in revenue?", "What was the change in revenue?",
                 "What discount rate did it use?", "What was the percentage change in revenue?"]  # fmt: skip
    batch = pa.table({"raw_output": [ANSWER] * 4, "reference": [25.0] * 4, "original_answer": ["25"] * 4,
                      "question": questions, "subset": ["TAT-DQA", "TAT-DQA", "TAT-DQA", "FinQA"]})  # fmt: skip
    out = parse(batch)
    assert out.column("em").to_pylist() == [1.0, 0.0, 0.0, 0.0]
    assert out.column("em_error").to_pylist() == [None, "scale", "scale", "scale"]
    assert out.column("percent_reading").to_pylist() == ["percent", "plain", "undecided", None]
    assert out.column("em_if_percent").to_pylist() == [None, None, 1.0, None]
