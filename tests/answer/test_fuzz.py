"""Fuzzing: every public function is total and returns the promised types on arbitrary input."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from t2rag.answer import (
    ParsedAnswer,
    Prediction,
    evaluate_formula,
    extract_answer,
    parse_number,
    predict,
    predict_value,
)
from t2rag.answer.predict import SOURCES

TABLE = """\
|    | company          | payments volume ( billions )   | total transactions ( billions ) |
|---:|:-----------------|:-------------------------------|--------------------------------:|
|  0 | visa inc. ( 1 )  | $ 2457                         |                             50.3 |
|  1 | american express | 637                            |                              5 |
"""

SEEDS = [
    "subtract(5829, 5735), divide(#0, 5735)",
    "divide(subtract(5829, 5735), 5735)",
    "table_average(visa inc. ( 1 ), none), divide(#0, const_100)",
    "exp(1.05, 2), greater(#0, const_m1)",
    "(5829 - 5735) / 5735 * 100",
    "multiply(12.5%, $ 1,234.5 million)",
    "-(2 ^ 3) ** 2 / (1,234 - 1e-3)",
    '{"reasoning_steps": ["a", "b"], "final_formula": "add(1, 2)", "computed_formula": "3"}',
    "```json\n{'reasoning_steps': ['x',], 'final_formula': None, 'computed_formula': 12.5,}\n```",
    'Prose {"final_formula": "divide(#0, 2)"} more {"computed_formula": "(1,234)"}',
    "(1,234.50)",
    "$ 3.2 million",
]

# An explicit characters() alphabet: text()'s default utf-8 codec alphabet costs hypothesis ~7 s to
# build on a checkout without a .hypothesis cache.
_CHARS = st.characters()
_CHARS_TEXT_20 = st.text(_CHARS, max_size=20)

FORMULA_ALPHABET = "0123456789.,()#%$ +-*/^_abcdeilmnoprstuvxyACDE\u2212\u00d7{}[]\"':\n"

_texts = st.one_of(
    st.text(_CHARS, max_size=200),
    st.binary(max_size=200).map(lambda raw: raw.decode("utf-8", errors="ignore")),
    st.text(alphabet=FORMULA_ALPHABET, max_size=120),
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A seed formula/JSON text with a few random deletions, insertions and duplications."""
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        position = draw(st.integers(min_value=0, max_value=len(text)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if action == "delete":
            text = text[:position] + text[position + 1 :]
        elif action == "insert":
            char = draw(st.one_of(st.sampled_from(FORMULA_ALPHABET), _CHARS))
            text = text[:position] + char + text[position:]
        else:
            text = text[:position] + text[position : position + 8] + text[position:]
    return text


_inputs = st.one_of(_texts, mutated())


def assert_number(value: object) -> None:
    assert value is None or (type(value) is float and math.isfinite(value))


def assert_prediction(prediction: object) -> None:
    assert isinstance(prediction, Prediction)
    assert_number(prediction.value)
    assert prediction.source in SOURCES
    assert (prediction.value is None) == (prediction.source == "none")
    assert prediction.formula is None or isinstance(prediction.formula, str)
    assert isinstance(prediction.json_ok, bool)
    assert isinstance(prediction.formula_ok, bool)
    assert prediction.formula_ok == (prediction.source == "formula")


@settings(max_examples=300, deadline=None)
@given(_inputs)
def test_parse_number_is_total(text: str) -> None:
    assert_number(parse_number(text))


@settings(max_examples=300, deadline=None)
@given(_inputs, st.sampled_from([None, TABLE]))
def test_evaluate_formula_is_total(text: str, table: str | None) -> None:
    assert_number(evaluate_formula(text, table))


@settings(max_examples=100, deadline=None)
@given(_inputs, _texts)
def test_evaluate_formula_with_fuzzed_table(text: str, table: str) -> None:
    assert_number(evaluate_formula("table_sum(" + text + ", none)", table))
    assert_number(evaluate_formula(text, "|" + table.replace("\n", "|\n|")))


@settings(max_examples=300, deadline=None)
@given(_inputs)
def test_extract_answer_is_total(text: str) -> None:
    parsed = extract_answer(text)
    assert isinstance(parsed, ParsedAnswer)
    assert isinstance(parsed.json_ok, bool)
    assert isinstance(parsed.reasoning_steps, tuple)
    assert all(isinstance(step, str) and step for step in parsed.reasoning_steps)
    for field in (parsed.final_formula, parsed.computed_formula):
        assert field is None or (isinstance(field, str) and field.strip().lower() not in {"", "none", "null"})


@settings(max_examples=200, deadline=None)
@given(_inputs, st.sampled_from([None, TABLE]))
def test_predict_is_total(text: str, table: str | None) -> None:
    assert_prediction(predict(text, table))


_cells = st.one_of(
    _inputs,
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.dictionaries(_CHARS_TEXT_20, st.one_of(st.text(_CHARS, max_size=30), st.floats(), st.none()), max_size=4),
    st.lists(st.integers(), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(_cells, st.sampled_from([None, TABLE]))
def test_predict_value_is_total(value: object, table: str | None) -> None:
    prediction = predict_value(value, table)
    assert_prediction(prediction)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            expected: float | None = float(value)
        except OverflowError:  # an int beyond the float range
            expected = None
        if expected is not None and not math.isfinite(expected):
            expected = None
        assert prediction.value == expected
        assert prediction.source == ("number" if expected is not None else "none")
