"""Hand-worked cases for evaluate_formula: FinQA programs, infix, numbers, tables and limits."""

from __future__ import annotations

import pytest

from t2rag.answer import FormulaError, evaluate_formula
from t2rag.answer.formula import MAX_DEPTH, MAX_LENGTH, MAX_STEPS

FINQA_TABLE = """\
|    | company          | payments volume ( billions )   | total transactions ( billions ) |
|---:|:-----------------|:-------------------------------|--------------------------------:|
|  0 | visa inc. ( 1 )  | $ 2457                         |                             50.3 |
|  1 | american express | 637                            |                              5 |
"""

TAT_CONTEXT = """\
Revenue grew strongly in 2019, as the table below shows.

| | 2019 | 2018 | 2017 |
| --- | --- | --- | --- |
| Order intake¹ | 1,234 | 1,100 | — |
| Restructuring, net | (1,212) | (300) | 12 |
| Margin | 12.5% | 10% | n/a |
| Revenue | 900 | 800 | 700 |

A second table follows.

| | 2019 | 2018 |
|:--|--:|--:|
| Revenue | 1 | 2 |
| Costs | 4 | 6 |
"""


def approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        # FinQA programs, nested and multi-step.
        ("subtract(5829, 5735), divide(#0, 5735)", (5829 - 5735) / 5735),
        ("divide(subtract(5829, 5735), 5735)", (5829 - 5735) / 5735),
        ("add(1, 2), multiply(#0, 3), subtract(#1, #0)", 6.0),
        ("multiply(2, 3), add(#0, const_100)", 106.0),
        ("divide(50, const_100)", 0.5),
        ("multiply(const_1000, 3)", 3000.0),
        ("add(const_m1, 0.5)", -0.5),
        ("multiply(const_2, const_m1)", -2.0),
        ("exp(1.05, 2)", 1.05**2),
        ("exp(2, -1)", 0.5),
        ("exp(4, 0.5)", 2.0),
        ("greater(5, 3)", 1.0),
        ("greater(3, 5)", 0.0),
        ("greater(3, 3)", 0.0),
        ("subtract(5, 2), greater(#0, 2)", 1.0),
        ("ADD(1, 2)", 3.0),
        ("Divide( 10 ,4 )", 2.5),
        ("  `divide(1, 4)`  ", 0.25),
        ('"divide(1, 4)"', 0.25),
        ("add(1, 2),", 3.0),
        ("add(1, 2); multiply(#0, 2)", 6.0),
        ("add(-1, 2)", 1.0),
        ("subtract(-(3), -2)", -1.0),
        # Infix arithmetic.
        ("(5829 - 5735) / 5735 * 100", (5829 - 5735) / 5735 * 100),
        ("1 + 2 * 3", 7.0),
        ("(1 + 2) * 3", 9.0),
        ("10 - 4 - 3", 3.0),
        ("100 / 10 / 5", 2.0),
        ("-5 + 3", -2.0),
        ("--5", 5.0),
        ("-(2 + 3) * 2", -10.0),
        ("2 * -3", -6.0),
        ("+4", 4.0),
        ("2 ^ 10", 1024.0),
        ("2 ** 3 ** 2", 2.0**9),
        ("-2 ^ 2", -4.0),
        ("2 ^ -1", 0.5),
        ("3 × 4 ÷ 2", 6.0),
        ("5829 \u2212 5735", 94.0),
        ("divide(5829 - 5735, 5735)", (5829 - 5735) / 5735),
        ("(5829 - 5735) / 5735, multiply(#0, 100)", (5829 - 5735) / 5735 * 100),
        # Number formats as operands.
        ("multiply(12.5%, 200)", 25.0),
        ("12.5% * 200", 25.0),
        ("add($5, $ 10)", 15.0),
        ("divide($ 3.2 million, 1,000)", 3200.0),
        ("3.2m / 2", 1.6e6),
        ("1e-3 * 1000", 1.0),
        ("divide(1.5E+3, 3)", 500.0),
        ("multiply(.5, 4.)", 2.0),
        ("42", 42.0),
        ("1,234", 1234.0),
    ],
)
def test_evaluates(formula: str, expected: float) -> None:
    assert evaluate_formula(formula) == approx(expected)


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("divide(1,234, 2)", 617.0),  # 1,234 is one number
        ("add(1,234,567, 1)", 1234568.0),
        ("add(1,234.5, 1)", 1235.5),
        ("1,234 + 1", 1235.0),
        ("divide(5735,100)", 57.35),  # leading group of 4 digits: separator
        ("add(1,2345)", 2346.0),  # four digits after the comma: separator
        ("add(12.5,100)", 112.5),  # a decimal point before the comma: separator
        ("add(1,23)", 24.0),
        ("add(1,234)", 235.0),  # add(1234) fails, so every comma is re-read as a separator
        ("subtract(1,000, 1)", 999.0),
    ],
)
def test_comma_rule(formula: str, expected: float) -> None:
    assert evaluate_formula(formula) == approx(expected)


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("table_average(visa inc. ( 1 ), none)", (2457 + 50.3) / 2),
        ("table_max(visa inc. ( 1 ), none)", 2457.0),
        ("table_min(american express, none)", 5.0),
        ("table_sum(American   Express, none)", 642.0),
        ("TABLE_SUM(american express, NONE)", 642.0),
        ("table_sum('american express', none)", 642.0),
        ("table_sum(american express)", 642.0),
        ("table_max(american express, none), divide(#0, const_100)", 6.37),
        ("divide(table_max(american express, none), 7)", 91.0),
        ("table_average(american express, none) * 2", 642.0),
    ],
)
def test_table_ops_on_finqa_markdown(formula: str, expected: float) -> None:
    assert evaluate_formula(formula, FINQA_TABLE) == approx(expected)


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("table_sum(order intake, none)", 2334.0),  # footnote mark ignored, '—' skipped
        ("table_sum(Order intake¹, none)", 2334.0),
        ("table_sum(restructuring, net, none)", -1500.0),  # row name holding a comma
        ("table_max(margin, none)", 0.125),
        ("table_average(revenue, none)", 800.0),  # first table wins over the second
        ("table_sum(costs, none)", 10.0),
    ],
)
def test_table_ops_on_tat_context(formula: str, expected: float) -> None:
    assert evaluate_formula(formula, TAT_CONTEXT) == approx(expected)


@pytest.mark.parametrize(
    ("formula", "table"),
    [
        ("table_max(american express, none)", None),
        ("table_max(discover, none)", FINQA_TABLE),
        ("table_max(company, none)", FINQA_TABLE),  # the header row has no numbers
        ("table_median(american express, none)", FINQA_TABLE),
        ("table_max(american express, none", FINQA_TABLE),
        ("table_max", FINQA_TABLE),
        ("table_max(, none)", FINQA_TABLE),
        ("add(none, 1)", FINQA_TABLE),
    ],
)
def test_table_op_failures(formula: str, table: str | None) -> None:
    assert evaluate_formula(formula, table) is None


@pytest.mark.parametrize(
    "formula",
    [
        "divide(1, 0)",
        "divide(1, subtract(5, 5))",
        "1 / 0",
        "1 / (2 - 2)",
        "divide(0, 0)",
        "exp(10, 1001)",  # exponent over the limit
        "exp(2, 1000.5)",
        "exp(10, 400)",  # overflows a float
        "exp(0, -1)",
        "exp(-8, 0.5)",
        "2 ^ 2000",
        "multiply(1e200, 1e200)",
        "add(1.7e308, 1.7e308)",
        "1e308 * 10",
        "1e999",
        "divide(1e300, 1e-300)",
    ],
)
def test_math_failures_are_none(formula: str) -> None:
    assert evaluate_formula(formula) is None


@pytest.mark.parametrize(
    "formula",
    [
        "",
        "   ",
        "None",
        "N/A",
        "add(1)",
        "add(1, 2, 3)",
        "add 1, 2",
        "add(1, 2",
        "add(1, 2))",
        "(1 + 2",
        "1 +",
        "* 2",
        "foo(1, 2)",
        "revenue - costs",
        "add(1, 2) = 3",
        "#0",
        "add(1, #1)",
        "add(1, 2), #2",
        "const_",
        "const_x",
        "5 % 3",
        "1.2.3",
        "eval('1+1')",
        "__import__('os')",
        "1 2",
        ",",
        "add(,)",
        "$",
    ],
)
def test_syntax_errors_are_none(formula: str) -> None:
    assert evaluate_formula(formula) is None


def _nested_adds(depth: int) -> str:
    return "add(1, " * depth + "1" + ")" * depth


def _nested_parens(depth: int) -> str:
    return "(" * depth + "1" + ")" * depth


def test_nesting_limit() -> None:
    assert evaluate_formula(_nested_adds(MAX_DEPTH)) == MAX_DEPTH + 1
    assert evaluate_formula(_nested_adds(MAX_DEPTH + 1)) is None
    assert evaluate_formula(_nested_adds(60)) is None
    assert evaluate_formula(_nested_parens(MAX_DEPTH)) == 1.0
    assert evaluate_formula(_nested_parens(60)) is None
    assert evaluate_formula("2 ^ " * 60 + "1") is None
    assert evaluate_formula("-" * 1500 + "5") == 5.0  # unary signs are a loop, not nesting


def test_step_limit() -> None:
    steps = ["1"] + [f"#{i}+1" for i in range(MAX_STEPS - 1)]
    assert evaluate_formula(", ".join(steps)) == MAX_STEPS
    assert evaluate_formula(", ".join(["1"] * (MAX_STEPS + 1))) is None


def test_length_limit() -> None:
    formula = "1" + " + 1" * ((MAX_LENGTH - 1) // 4)
    formula += " " * (MAX_LENGTH - len(formula))
    assert len(formula) == MAX_LENGTH
    assert evaluate_formula(formula) == (MAX_LENGTH - 1) // 4 + 1
    assert evaluate_formula(formula + " ") is None


@pytest.mark.parametrize("value", [None, 5, 1.5, b"add(1, 2)", ["add(1, 2)"]])
def test_non_string_input(value: object) -> None:
    assert evaluate_formula(value) is None  # type: ignore[arg-type]


def test_non_string_table_is_ignored() -> None:
    assert evaluate_formula("add(1, 2)", 123) == 3.0  # type: ignore[arg-type]
    assert evaluate_formula("table_max(a, none)", 123) is None  # type: ignore[arg-type]


def test_formula_error_is_value_error() -> None:
    assert issubclass(FormulaError, ValueError)


ROW_NAMES_TABLE = """| item | 2019 | 2018 |
|---|---|---|
| XeroX | 4 | 6 |
| net sales, end of year | 10 | 30 |
| revenue ((adjusted)) | 7 | 9 |
| 'quoted' | 1 | 3 |
"""


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("table_max(XeroX, none)", 6.0),  # a name starting and ending with the same letter is not quoted
        ("table_sum(net sales, end of year)", 40.0),  # the comma belongs to the row: no "none" after it
        ("table_sum(net sales, end of year,none)", 40.0),  # "none" right after the comma
        ("table_average(revenue ((adjusted)), none)", 8.0),  # nested parentheses in the name
        ("table_min(\"'quoted'\", none)", 1.0),  # the outer quotes are the formula's, the inner the row's
        ("table_max('net sales, end of year', none)", 30.0),
        ("exp(1, 1000)", 1.0),  # the largest exponent allowed
        ("exp(2, 1001)", None),
        ("exp(2, -1001)", None),
    ],
)
def test_row_names_and_limits(formula: str, expected: float | None) -> None:
    got = evaluate_formula(formula, ROW_NAMES_TABLE)
    assert got == (None if expected is None else approx(expected))


def test_depth_is_nesting_not_length_and_the_fallback_pass_keeps_the_table():
    """Sixty groups side by side are not nested sixty deep; sixty deep is too deep, however many groups came
    before. The second reading of a formula (commas as separators) still has the table."""
    assert evaluate_formula("+".join(["(1)"] * 60)) == 60.0
    assert evaluate_formula("+".join(["add(1, 1)"] * 60)) == 120.0
    assert evaluate_formula("+".join(["exp(1, 2)"] * 60)) == 60.0
    assert evaluate_formula("+".join(["(1)"] * 60) + "+" + "(" * 60 + "1" + ")" * 60) is None
    assert evaluate_formula("add(1,234) + table_max(XeroX, none)", ROW_NAMES_TABLE) == 241.0


def test_constants_of_up_to_300_digits():
    assert evaluate_formula("const_" + "1" * 300) == approx(float("1" * 300))
    assert evaluate_formula("const_" + "1" * 301) is None
