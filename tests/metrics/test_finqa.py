"""FinQA's execution accuracy on real FinQA dev rows: the value at 5 decimals, sign and power of ten counting."""

from __future__ import annotations

import pytest

from t2rag.metrics import number_match_one
from t2rag.metrics.finqa import execution_match
from tests.conftest import real_table

ROWS = real_table("FinQA").select(["id", "program_answer"]).to_pylist()
REFERENCES = {r["id"]: float(r["program_answer"]) for r in ROWS}


@pytest.mark.parametrize(
    ("qid", "reference", "prediction", "exe", "nm"),
    [
        ("finqa_dev_0", 127.4, 127.400004, True, True),  # 127.40000 both sides at 5 decimals
        ("finqa_dev_0", 127.4, 127.40001, False, True),  # 127.40001: FinQA's rounding is stricter than NM's 1%
        ("finqa_dev_0", 127.4, -127.4, False, True),  # the sign counts
        ("finqa_dev_1", 0.935, 93.5, False, True),  # so does the power of ten
        ("finqa_dev_2", 24.691358024691358, 24.6913580, True, True),  # 24.69136 both sides
        ("finqa_dev_2", 24.691358024691358, 24.69, False, True),
        ("finqa_dev_10", 0.1999999999999993, 0.2, True, True),
        ("finqa_dev_10", 0.1999999999999993, None, False, False),
    ],
)
def test_execution_accuracy_on_real_rows(qid, reference, prediction, exe, nm):
    assert REFERENCES[qid] == reference
    assert execution_match(prediction, REFERENCES[qid]) is exe
    assert number_match_one(prediction, REFERENCES[qid]) is nm


def test_every_gold_value_executes_to_itself_and_nan_never_does():
    for value in REFERENCES.values():
        assert execution_match(value, value)
    assert not execution_match(float("nan"), float("nan"))
    assert not execution_match(1.0, None)
