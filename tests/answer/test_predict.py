"""The prediction policy."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal

import numpy as np
import pytest

from t2rag.answer import Prediction, predict, predict_value

TABLE = """\
|    | company          | payments volume ( billions )   |
|---:|:-----------------|:-------------------------------|
|  0 | visa inc. ( 1 )  | $ 2457                         |
|  1 | american express | 637                            |
"""


def answer(formula: object, computed: object) -> str:
    body = json.dumps({"reasoning_steps": ["x"], "final_formula": formula, "computed_formula": computed})
    return f"Answer:\n```json\n{body}\n```"


def test_formula_wins_over_computed() -> None:
    prediction = predict(answer("subtract(5829, 5735), divide(#0, 5735)", "0.5"))
    assert prediction.value == pytest.approx(94 / 5735, rel=1e-12)
    assert prediction.source == "formula"
    assert prediction.formula == "subtract(5829, 5735), divide(#0, 5735)"
    assert prediction.json_ok
    assert prediction.formula_ok


def test_computed_when_formula_fails() -> None:
    prediction = predict(answer("divide(revenue, costs)", "1,234.5"))
    assert prediction.value == 1234.5
    assert prediction.source == "computed"
    assert prediction.formula == "divide(revenue, costs)"
    assert prediction.json_ok
    assert not prediction.formula_ok


def test_computed_when_formula_missing() -> None:
    prediction = predict(answer("None", "12.5%"))
    assert (prediction.value, prediction.source, prediction.formula) == (0.125, "computed", None)


def test_computed_json_number() -> None:
    assert predict(answer(None, 0.25)).value == 0.25


def test_nothing_usable() -> None:
    prediction = predict(answer("divide(1, 0)", "N/A"))
    assert prediction == Prediction(None, "none", "divide(1, 0)", json_ok=True, reasoning_steps=("x",))
    assert predict("I cannot answer this.") == Prediction(None, "none")


def test_computed_that_is_a_formula_is_not_evaluated() -> None:
    assert predict(answer(None, "divide(1, 4)")).source == "none"


def test_table_is_passed_through() -> None:
    raw = answer("table_max(american express, none), divide(#0, const_100)", "6")
    assert predict(raw, TABLE).value == pytest.approx(6.37)
    assert predict(raw, TABLE).source == "formula"
    assert predict(raw).source == "computed"  # no table: the formula fails


def test_regex_fallback_prediction() -> None:
    prediction = predict('{"reasoning_steps": ["a"], "final_formula": "add(1, 2)", "computed_formula": "3')
    assert prediction.value == 3.0
    assert prediction.source == "formula"
    assert not prediction.json_ok


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (-2.5, -2.5),
        (np.float64(0.5), 0.5),
        (np.int32(4), 4.0),
        (Decimal("1.25"), 1.25),
        ("0.0164", 0.0164),
        ("12.5%", 0.125),
        ("$ 1,234", 1234.0),
        ("(1,212)", -1212.0),
        (" 3.2 million ", 3.2e6),
    ],
)
def test_predict_value_numbers(value: object, expected: float) -> None:
    assert predict_value(value) == Prediction(expected, "number")


@pytest.mark.parametrize("value", [None, True, False, float("nan"), float("inf"), [1.0], object(), b"1"])
def test_predict_value_nothing(value: object) -> None:
    assert predict_value(value) == Prediction(None, "none")


def test_predict_value_strings_go_through_predict() -> None:
    raw = answer("exp(1.05, 2)", "1.1")
    assert predict_value(raw) == predict(raw)
    assert predict_value(raw).source == "formula"
    raw = answer("table_max(american express, none)", None)
    assert predict_value(raw, TABLE).value == 637.0
    assert predict_value("N/A").source == "none"
    assert predict_value("2021-12-12").source == "none"


def test_predict_value_dict_cell() -> None:
    prediction = predict_value({"final_formula": "add(1, 2)", "computed_formula": "3"})
    assert (prediction.value, prediction.source) == (3.0, "formula")
    assert predict_value({(1, 2): "bad key"}).source == "none"


def test_prediction_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        predict_value(1).value = 2.0  # type: ignore[misc]
