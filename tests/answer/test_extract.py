"""Finding the answer object in raw model output."""

from __future__ import annotations

import dataclasses
import time

import pytest

from t2rag.answer import ParsedAnswer, extract_answer

PLAIN = (
    '{"reasoning_steps": ["Revenue rose from 5735 to 5829.", "Change is 94."], '
    '"final_formula": "divide(subtract(5829, 5735), 5735)", "computed_formula": "0.0164"}'
)
STEPS = ("Revenue rose from 5735 to 5829.", "Change is 94.")
FORMULA = "divide(subtract(5829, 5735), 5735)"


def test_plain_json() -> None:
    assert extract_answer(PLAIN) == ParsedAnswer(
        json_ok=True, reasoning_steps=STEPS, final_formula=FORMULA, computed_formula="0.0164"
    )


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{PLAIN}\n```",
        f"```\n{PLAIN}\n```",
        f"```JSON\n{PLAIN}```\n",
        f"Here is my answer:\n\n{PLAIN}\n\nLet me know if you need more.",
        f"Thinking... the set {{a, b}} is small.\n```json\n{PLAIN}\n```\nDone {{}}",
        f"  \n{PLAIN}  ",
    ],
)
def test_wrapped_json(text: str) -> None:
    parsed = extract_answer(text)
    assert parsed.json_ok
    assert parsed.final_formula == FORMULA
    assert parsed.computed_formula == "0.0164"
    assert parsed.reasoning_steps == STEPS


def test_two_objects_prefers_last_answer() -> None:
    first = '{"final_formula": "add(1, 2)", "computed_formula": "3"}'
    second = '{"final_formula": "add(2, 2)", "computed_formula": "4"}'
    parsed = extract_answer(f"Draft: {first}\nCorrected: {second}")
    assert parsed.final_formula == "add(2, 2)"
    assert parsed.computed_formula == "4"


def test_last_object_with_keys_beats_later_object_without() -> None:
    text = '{"final_formula": "add(1, 2)"} and then {"confidence": 0.9}'
    assert extract_answer(text).final_formula == "add(1, 2)"


def test_object_without_keys() -> None:
    parsed = extract_answer('{"note": "no answer"} {"other": 1}')
    assert parsed == ParsedAnswer(json_ok=True)


def test_nested_answer_object() -> None:
    parsed = extract_answer('{"answer": {"final_formula": "exp(2, 3)", "computed_formula": 8}}')
    assert parsed.json_ok
    assert parsed.final_formula == "exp(2, 3)"
    assert parsed.computed_formula == "8"


def test_key_spelling_variants() -> None:
    parsed = extract_answer('{"Final Formula": "add(1, 2)", "Computed-Formula": "3", "REASONING_STEPS": "x"}')
    assert parsed.final_formula == "add(1, 2)"
    assert parsed.computed_formula == "3"
    assert parsed.reasoning_steps == ("x",)


def test_trailing_commas() -> None:
    text = '{"reasoning_steps": ["a", "b",], "final_formula": "add(1, 2)", "computed_formula": "3",}'
    parsed = extract_answer(text)
    assert parsed.json_ok
    assert parsed.reasoning_steps == ("a", "b")
    assert parsed.final_formula == "add(1, 2)"
    assert parsed.computed_formula == "3"


def test_single_quotes_and_python_literals() -> None:
    text = "{'reasoning_steps': ['it\\'s \"up\"', 'b'], 'final_formula': None, 'computed_formula': '12.5%', 'x': True}"
    parsed = extract_answer(text)
    assert parsed.json_ok
    assert parsed.reasoning_steps == ('it\'s "up"', "b")
    assert parsed.final_formula is None
    assert parsed.computed_formula == "12.5%"


def test_apostrophes_inside_double_quoted_strings_survive_repair() -> None:
    text = '{"reasoning_steps": ["the company\'s revenue",], "final_formula": "add(1, 2)"}'
    parsed = extract_answer(text)
    assert parsed.json_ok
    assert parsed.reasoning_steps == ("the company's revenue",)


def test_bare_keys() -> None:
    parsed = extract_answer('{final_formula: "add(1, 2)", computed_formula: 3}')
    assert parsed.json_ok
    assert parsed.final_formula == "add(1, 2)"


def test_raw_newline_inside_string() -> None:
    parsed = extract_answer('{"final_formula": "add(1,\n 2)"}')
    assert parsed.final_formula == "add(1,\n 2)"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.0164", "0.0164"),
        (" 5 ", "5"),
        (0.0164, "0.0164"),
        (5, "5"),
        (-3, "-3"),
        (1.5e-07, "1.5e-07"),
    ],
)
def test_computed_numbers_become_text(value: object, expected: str) -> None:
    raw = f'"{value}"' if isinstance(value, str) else repr(value)
    assert extract_answer(f'{{"computed_formula": {raw}}}').computed_formula == expected


@pytest.mark.parametrize("raw", ['""', '"   "', '"None"', '"none"', '"N/A"', '"n/a"', '"null"', "null", "true"])
def test_null_like_values(raw: str) -> None:
    parsed = extract_answer(f'{{"final_formula": {raw}, "computed_formula": {raw}}}')
    assert parsed.json_ok
    assert parsed.final_formula is None
    assert parsed.computed_formula is None


def test_missing_keys() -> None:
    parsed = extract_answer('{"final_formula": "add(1, 2)"}')
    assert parsed == ParsedAnswer(json_ok=True, final_formula="add(1, 2)")


def test_steps_forms() -> None:
    assert extract_answer('{"reasoning_steps": "one step"}').reasoning_steps == ("one step",)
    assert extract_answer('{"reasoning_steps": ["a", "", null, 3, {"b": 1}]}').reasoning_steps == (
        "a",
        "3",
        '{"b": 1}',
    )
    assert extract_answer('{"reasoning_steps": null, "final_formula": "1"}').reasoning_steps == ()


def test_formula_as_list_of_steps() -> None:
    parsed = extract_answer('{"final_formula": ["subtract(5829, 5735)", "divide(#0, 5735)"]}')
    assert parsed.final_formula == "subtract(5829, 5735), divide(#0, 5735)"


@pytest.mark.parametrize("text", ["", "no json here", "The answer is 42.", "{", "}", "{not json at all}", "[1, 2]"])
def test_no_json(text: str) -> None:
    assert extract_answer(text) == ParsedAnswer()


def test_truncated_json_uses_regex_fallback() -> None:
    text = (
        '```json\n{"reasoning_steps": ["Revenue rose.", "Change is \\"94\\"."], '
        '"final_formula": "divide(subtract(5829, 5735), 5735)", "computed_formula": "0.01'
    )
    parsed = extract_answer(text)
    assert not parsed.json_ok
    assert parsed.reasoning_steps == ("Revenue rose.", 'Change is "94".')
    assert parsed.final_formula == FORMULA
    assert parsed.computed_formula is None  # cut off mid-value, so not trusted


def test_truncated_inside_steps() -> None:
    parsed = extract_answer('{"reasoning_steps": ["first", "second", "thi')
    assert not parsed.json_ok
    assert parsed.reasoning_steps == ("first", "second")
    assert parsed.final_formula is None


def test_regex_fallback_on_broken_json() -> None:
    text = 'final_formula: divide(94, 5735)\n"computed_formula": 0.0164}\n{"unclosed": '
    parsed = extract_answer(text)
    assert not parsed.json_ok
    assert parsed.final_formula == "divide(94, 5735)"
    assert parsed.computed_formula == "0.0164"


def test_regex_fallback_single_quotes_and_last_occurrence() -> None:
    text = "'final_formula': 'add(1, 2)' ... 'final_formula': 'add(3, 4)', 'computed_formula': None"
    parsed = extract_answer(text)
    assert parsed.final_formula == "add(3, 4)"
    assert parsed.computed_formula is None


def test_regex_fallback_ignores_longer_key_names() -> None:
    assert extract_answer('my_final_formula: "add(1, 2)"').final_formula is None


@pytest.mark.parametrize("value", [None, 5, b"{}", ["{}"]])
def test_non_string_input(value: object) -> None:
    assert extract_answer(value) == ParsedAnswer()  # type: ignore[arg-type]


def test_parsed_answer_is_frozen() -> None:
    parsed = extract_answer(PLAIN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.final_formula = "x"  # type: ignore[misc]


def test_pathological_inputs_are_fast_enough() -> None:
    """Deeply nested or endlessly repeated brackets parse in linear time: each well under a second (about 0.35 s
    for the slowest on 2 cores; a quadratic scan of these would take minutes)."""
    balanced = "{" * 50_000 + "}" * 50_000  # every brace has a partner: only the repair budget bounds the repairs
    for text in ["{" * 100_000, '{"a": ' * 20_000, "[" * 50_000, '{"x": 1}' * 5_000, "{'a': '" * 10_000, balanced]:
        started = time.perf_counter()
        assert isinstance(extract_answer(text), ParsedAnswer)
        assert time.perf_counter() - started < 3.0, text[:10]
