"""Hand-worked cases and round trips for parse_number."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2rag.answer import parse_number
from t2rag.answer.numerals import magnitude_pattern


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0.0),
        ("42", 42.0),
        ("  42  ", 42.0),
        ("1234.5", 1234.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("12.5%", 0.125),
        ("12.3%", 0.123),
        ("12.5 %", 0.125),
        ("-3%", -0.03),
        ("1,234", 1234.0),
        ("1,234,567.89", 1234567.89),
        ("(1,234)", -1234.0),
        ("(1,212)", -1212.0),
        ("( 12.5% )", -0.125),
        ("($ 1,234.50)", -1234.5),
        ("$(7)", -7.0),
        ("$5", 5.0),
        ("$ 5", 5.0),
        ("$ 2457", 2457.0),
        ("-$5", -5.0),
        ("$-5", -5.0),
        ("$ -5", -5.0),
        ("€3.5", 3.5),
        ("3.2 million", 3_200_000.0),
        ("3.2 Million", 3_200_000.0),
        ("$3.2 million", 3_200_000.0),
        ("2 millions", 2_000_000.0),
        ("5 thousand", 5_000.0),
        ("1.5 billion", 1_500_000_000.0),
        ("2 trillion", 2e12),
        ("4k", 4_000.0),
        ("4K", 4_000.0),
        ("3.2m", 3_200_000.0),
        ("3.2 m", 3_200_000.0),
        ("7mn", 7_000_000.0),
        ("7MM", 7_000_000.0),
        ("2.5bn", 2_500_000_000.0),
        ("2.5B", 2_500_000_000.0),
        ("1,234.5 million", 1_234_500_000.0),
        ("\u22125", -5.0),  # unicode minus
        ("\u2212 5.5", -5.5),
        ("\u20137", -7.0),  # en dash used as a minus
        ("+5", 5.0),
        ("+ 5", 5.0),
        ("1e-3", 0.001),
        ("2.5E+3", 2500.0),
        ("-1e5", -100_000.0),
        ("5\u00a0%", 0.05),  # no-break space
        ("2021", 2021.0),
        ("1e-400", 0.0),  # underflow to zero is still a finite number
    ],
)
def test_parses(text: str, expected: float) -> None:
    assert parse_number(text) == pytest.approx(expected, rel=1e-15, abs=0)


def test_percent_is_exact() -> None:
    # 12.3 / 100 in floats is 0.12300000000000001; the parser must give the nearest double.
    assert parse_number("12.3%") == 0.123
    assert parse_number("3.2m") == 3.2e6


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "N/A",
        "n/a",
        "None",
        "none",
        "null",
        "nan",
        "NaN",
        "-nan",
        "inf",
        "-inf",
        "Infinity",
        "2021-12-12",
        "352-05-12",
        "12/31/2021",
        "5-10",
        "5 - 10",
        "1e999",
        "-1e999",
        "1,23",
        "12,3456",
        "1234,567",
        "1,234,56",
        "1.2.3",
        "--5",
        "+-5",
        "-(5)",
        "(5",
        "5)",
        "$",
        "%",
        "-",
        "5%%",
        "abc",
        "5 apples",
        "5 meters",
        "1e",
        "1_000",
        "0x10",
        "\u0663",  # ARABIC-INDIC DIGIT THREE: float() would accept it
        "\u2014",  # em dash, a nil cell in tables
        "1" * 201,
    ],
)
def test_rejects(text: str) -> None:
    assert parse_number(text) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (-2.5, -2.5),
        (Decimal("1.5"), 1.5),
        (Fraction(1, 4), 0.25),
        (np.float64(2.5), 2.5),
        (np.int64(7), 7.0),
        (0, 0.0),
    ],
)
def test_numbers_pass_through(value: object, expected: float) -> None:
    result = parse_number(value)
    assert type(result) is float
    assert result == expected


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        np.bool_(True),
        None,
        float("nan"),
        float("inf"),
        -float("inf"),
        np.float64("nan"),
        Decimal("NaN"),
        Decimal("Infinity"),
        10**400,
        b"5",
        [5],
        {"x": 5},
        5 + 0j,
        object(),
    ],
)
def test_non_numbers_are_none(value: object) -> None:
    assert parse_number(value) is None


_amounts = st.integers(min_value=-(10**14), max_value=10**14).map(lambda cents: Decimal(cents).scaleb(-2))


def _grouped(amount: Decimal) -> str:
    return f"{abs(amount):,.2f}"


@settings(max_examples=150, deadline=None)
@given(_amounts, st.sampled_from(["plain", "dollar", "dollar_space", "parens", "unicode_minus"]))
def test_formatted_amounts_round_trip(amount: Decimal, style: str) -> None:
    body = _grouped(amount)
    negative = amount < 0
    if style == "plain":
        text = ("-" if negative else "") + body
    elif style == "dollar":
        text = ("-$" if negative else "$") + body
    elif style == "dollar_space":
        text = ("$ -" if negative else "$ ") + body
    elif style == "parens":
        text = f"({body})" if negative else body
    else:
        text = ("\u2212" if negative else "") + body
    assert parse_number(text) == float(amount)


@settings(max_examples=100, deadline=None)
@given(_amounts)
def test_percent_round_trip(amount: Decimal) -> None:
    text = f"{amount:,.2f}%"
    assert parse_number(text) == float(amount / 100)
    assert parse_number(f"({_grouped(amount)}%)") == -float(abs(amount) / 100)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**6).map(lambda n: Decimal(n).scaleb(-1)),
    st.sampled_from([("thousand", 3), ("million", 6), ("billion", 9), ("k", 3), ("mn", 6), ("bn", 9)]),
)
def test_scale_round_trip(amount: Decimal, scale: tuple[str, int]) -> None:
    word, power = scale
    assert parse_number(f"{amount} {word}") == float(amount.scaleb(power))


@settings(max_examples=150, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_repr_round_trip(value: float) -> None:
    assert parse_number(repr(value)) == value
    assert parse_number(value) == value
    assert parse_number(f"{value:,}") == value  # with thousands separators


@pytest.mark.parametrize(
    ("text", "grouping", "groups"),
    [
        ("$1,234.5", True, {"digits": "1,234.5"}),
        ("1,234.5", False, None),  # without grouping a comma ends the number
        ("1,2345", True, None),  # four digits after a comma: not a thousands group
        ("12,345,678", True, {"digits": "12,345,678"}),
        ("€ .5", True, {"digits": ".5"}),
        ("3.", True, {"digits": "3."}),
        ("2.5e-3", True, {"digits": "2.5", "exp": "e-3"}),
        ("7 %", True, {"digits": "7", "pct": "%"}),
        ("4 Billions", True, {"digits": "4", "word": "Billion"}),  # the plural s is matched, not captured
        ("£9bn", True, {"digits": "9", "short": "bn"}),
        ("9 k", True, {"digits": "9", "short": "k"}),
        ("9  k", True, None),  # one space at most before a short scale
        ("9 kilo", True, None),  # a short scale is a whole word
    ],
)
def test_the_magnitude_pattern_reads_numbers_and_their_scale(text, grouping, groups) -> None:
    """The pattern itself (the parser compiles it once at import): what it takes whole, and its named groups."""
    pattern = magnitude_pattern() if grouping else magnitude_pattern(grouping=False)  # grouping is the default
    match = re.compile(pattern, re.IGNORECASE).fullmatch(text)
    if groups is None:
        assert match is None
    else:
        assert match is not None and {k: v for k, v in match.groupdict().items() if v} == groups
