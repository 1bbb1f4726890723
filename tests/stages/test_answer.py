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
