"""Markdown table row lookup."""

from __future__ import annotations

import pytest

from t2rag.answer.table import cell_value, find_row_values, iter_table_rows

TABLE = """\
Some text | with a pipe that is not a table row.

|    | company          | 2019   | 2018 |
|---:|:-----------------|:-------|-----:|
|  0 | net sales        | $ 100  | 90   |
|  1 | Cost  of  Sales  | (40)   | —    |
|  2 | 2017             | 7      | 8    |
|  3 | Revenue:         |        |      |
|  4 | revenue          | 5      | 6    |
"""


def test_iter_table_rows_skips_alignment_and_prose() -> None:
    rows = list(iter_table_rows(TABLE))
    assert rows[0] == ["", "company", "2019", "2018"]
    assert rows[1] == ["0", "net sales", "$ 100", "90"]
    assert len(rows) == 6


def test_find_row_values() -> None:
    assert find_row_values(TABLE, "net sales") == [100.0, 90.0]
    assert find_row_values(TABLE, "  NET   SALES ") == [100.0, 90.0]
    assert find_row_values(TABLE, "cost of sales") == [-40.0]  # the em dash cell is not a number


def test_label_only_rows_are_passed_over() -> None:
    # "Revenue:" matches loosely but has no numbers; the exact "revenue" row is found first anyway.
    assert find_row_values(TABLE, "revenue") == [5.0, 6.0]
    assert find_row_values(TABLE, "revenue:") == [5.0, 6.0]


def test_numeric_label_fallback() -> None:
    assert find_row_values(TABLE, "2017") == [7.0, 8.0]


def test_missing_rows() -> None:
    assert find_row_values(TABLE, "gross margin") is None
    assert find_row_values(TABLE, "") is None
    assert find_row_values("no tables here", "net sales") is None
    assert find_row_values("", "net sales") is None


FINQA_STYLE = """\
|    | item                 | 2012      | 2011           | 2010    |
|---:|:---------------------|:----------|:---------------|:--------|
|  0 | change in fair value | -2 ( 2 )  | 5% ( 5 % )     | -       |
|  1 | 2009                 | $ 10      | 20             | 30      |
"""


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("-2 ( 2 )", -2.0),
        ("5% ( 5 % )", 0.05),
        ("(1,212)", -1212.0),
        ("$(7)", -7.0),
        ("$ 2457", 2457.0),
        ("total ( 1 )", None),
        ("( a )", None),
        ("-", None),
        ("—", None),
    ],
)
def test_cell_value(cell: str, expected: float | None) -> None:
    assert cell_value(cell) == expected


def test_finqa_cells_and_year_labels() -> None:
    assert find_row_values(FINQA_STYLE, "change in fair value") == [-2.0, 0.05]
    assert find_row_values(FINQA_STYLE, "2009") == [10.0, 20.0, 30.0]
