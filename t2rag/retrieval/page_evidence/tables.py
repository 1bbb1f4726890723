"""The markdown tables of a context as the corpus holds them: their row labels, each with the table it is in
(TAT-DQA's label column and header rows; FinQA's pandas markdown with an index column, glued to the line before it)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from t2rag.retrieval.years import YEAR, year_mask

_SEPARATOR_CELL = re.compile(r"^:?-+:?$")


def row_labels(text: str) -> list[str]:
    """The row labels (first cells of data rows, lowercased) of every markdown table in a context.

    A table is a run of lines holding at least two '|'; a first line glued to the sentence before it ("... 2006
    ._| | millions |") starts at its first '|'. Rows above the separator, rows whose first cell is empty (a
    second header row of years) and rows of years alone are header rows, not labels; a pandas index column
    (right-aligned, numbers only) is dropped; a label wrapped onto the next printed row is joined (`_continues`).
    """
    return [label for label, _ in labelled_rows(text)]


def labelled_rows(text: str) -> list[tuple[str, int]]:
    """Each row label of a context's tables (as `row_labels` gives them) with the years its table's header rows
    name, as a `year_mask`; a table whose header names none has its caption's ("... for the years ended December
    31, 2019 and 2018:")."""
    labelled: list[tuple[str, int]] = []
    for caption, rows in tables_of(text):
        raw = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
        sep = next((i for i, row in enumerate(raw) if _is_separator(row)), None)
        if sep is not None and _has_index_column(raw, sep):
            raw = [row[1:] for row in raw]
        header_rows = set(range(sep if sep is not None else 1))
        header_rows |= {i for i, row in enumerate(raw) if i != sep and _years_only(row)}
        header = [row for i, row in enumerate(raw) if i != sep and (i in header_rows or not row or not row[0])]
        years = year_mask(" ".join(cell for row in header for cell in row)) or year_mask(caption)
        data = [row for i, row in enumerate(raw) if i != sep and i not in header_rows and row and row[0]]
        joined: list[list[str]] = []
        for row in data:
            if joined and _continues(joined[-1], row):
                joined[-1] = [f"{joined[-1][0]} {row[0]}", *(joined[-1][1:] if any(joined[-1][1:]) else row[1:])]
            else:
                joined.append(row)
        labelled += [(row[0].lower(), years) for row in joined]
    return labelled


def _continues(previous: list[str], row: list[str]) -> bool:
    """Whether a row's label is the rest of the row above's, wrapped in the printed table: it starts in lower case
    ("Depreciation" / "and amortisation") and one of the two rows holds no values."""
    return row[0][0].islower() and (not any(row[1:]) or not any(previous[1:]))


def _years_only(row: list[str]) -> bool:
    """Whether a row's cells are years and blanks only: a header row printed below the separator."""
    cells = [c.strip("*") for c in row if c]
    return bool(cells) and all(YEAR.fullmatch(c) for c in cells)


def tables_of(text: str) -> Iterable[tuple[str, list[str]]]:
    """Each table's rows with its caption: the last line of text before it (or the text its first row is glued to)."""
    rows: list[str] = []
    caption = last = ""
    for line in text.splitlines():
        if line.count("|") >= 2:
            if not rows:
                glued = line[: line.index("|")].strip()
                caption = glued or last
            rows.append(line[line.index("|") :])
        else:
            if rows:
                yield caption, rows
                rows = []
            if line.strip():
                last = line.strip()
    if rows:
        yield caption, rows


def _is_separator(row: list[str]) -> bool:
    return any(row) and all(not c or _SEPARATOR_CELL.match(c.replace(" ", "")) for c in row)


def _has_index_column(cells: list[list[str]], sep: int) -> bool:
    return cells[sep][0].replace(" ", "") in ("---:", "--:", "-:") and all(
        not row[0] or row[0].isdigit() for row in cells[sep + 1 :] if row
    )
