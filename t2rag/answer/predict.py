"""The prediction policy: from raw model output (or a predictions-file cell) to one number."""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from decimal import Decimal

from t2rag.answer.extract import extract_answer
from t2rag.answer.formula import evaluate_formula
from t2rag.answer.numerals import parse_number

__all__ = ["SOURCES", "Prediction", "predict", "predict_value"]

SOURCES = ("formula", "computed", "number", "none")


@dataclass(frozen=True)
class Prediction:
    """A predicted value and where it came from.

    ``source`` is one of :data:`SOURCES`; ``formula`` is the extracted ``final_formula`` (even
    when it did not evaluate); ``formula_ok`` says that it was present and evaluated.
    """

    value: float | None
    source: str
    formula: str | None = None
    json_ok: bool = False
    formula_ok: bool = False
    reasoning_steps: tuple[str, ...] = ()


_NO_PREDICTION = Prediction(value=None, source="none")


def predict(raw_text: str, table: str | None = None) -> Prediction:
    """Predict from raw model output. Never raises.

    The policy: the value of ``final_formula`` when it evaluates (source ``"formula"``), else
    ``computed_formula`` when it is a number (``"computed"``), else no value (``"none"``).
    ``table`` is the context text whose markdown tables feed ``table_*`` operations.
    """
    parsed = extract_answer(raw_text)
    formula = parsed.final_formula
    if formula is not None:
        value = evaluate_formula(formula, table)
        if value is not None:
            return Prediction(value, "formula", formula, parsed.json_ok, True, parsed.reasoning_steps)
    computed = parse_number(parsed.computed_formula)
    if computed is not None:
        return Prediction(computed, "computed", formula, parsed.json_ok, False, parsed.reasoning_steps)
    return Prediction(None, "none", formula, parsed.json_ok, False, parsed.reasoning_steps)


def predict_value(value: object, table: str | None = None) -> Prediction:
    """Predict from one predictions-file cell. Never raises.

    Real numbers (not bools) and strings that are wholly a number give source ``"number"``;
    other strings (and dicts, re-serialised) go through :func:`predict`; anything else,
    including None, NaN and infinities, gives source ``"none"``.
    """
    if isinstance(value, bool) or value is None:
        return _NO_PREDICTION
    if isinstance(value, (numbers.Real, Decimal)):
        number = parse_number(value)
        return _NO_PREDICTION if number is None else Prediction(number, "number")
    if isinstance(value, str):
        number = parse_number(value)
        if number is not None:
            return Prediction(number, "number")
        return predict(value, table)
    if isinstance(value, dict):
        try:
            text = json.dumps(value, default=str, allow_nan=True)
        except (TypeError, ValueError, RecursionError):  # e.g. non-string keys that json rejects
            return _NO_PREDICTION
        return predict(text, table)
    return _NO_PREDICTION
