"""Row lookup in the markdown pipe tables embedded in report contexts.

A table row is any line whose first non-blank character is ``|``; alignment rows such as
``|---:|:---|`` are skipped. A row's label is its first non-empty cell that does not parse as a
number (so a pandas index column is passed over); its values are the later cells that parse as
numbers (``$ 2457``, ``(1,212)``, ``12.5%``, FinQA's ``-2 ( 2 )``; ``—`` and text cells are ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from t2rag.answer.numerals import parse_number

__all__ = ["cell_value", "find_row_values", "iter_table_rows"]

_FOOTNOTE_MARKS = frozenset("¹²³⁴⁵⁶⁷⁸⁹⁰*†‡§")


def iter_table_rows(text: str) -> Iterator[list[str]]:
    """Yield the stripped cells of every markdown table row in ``text``, alignment rows excluded."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            continue
        body = stripped[1:-1] if len(stripped) > 1 and stripped.endswith("|") else stripped[1:]
        cells = [cell.strip() for cell in body.split("|")]
        if all(_is_alignment(cell) for cell in cells):
            continue
        yield cells


def _is_alignment(cell: str) -> bool:
    return not cell.strip(":-") and (not cell or "-" in cell)


def _exact_key(name: str) -> str:
    return " ".join(name.casefold().split())


def _loose_key(name: str) -> str:
    # Ignores punctuation, spacing and footnote marks: "Order intake¹" ~ "order intake".
    return "".join(ch for ch in name.casefold() if ch.isalnum() and ch not in _FOOTNOTE_MARKS)


@lru_cache(maxsize=16)
def _labelled_rows(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(label, cells after the label) for every row that has a label."""
    rows = []
    for cells in iter_table_rows(text):
        for index, cell in enumerate(cells):
            if cell and cell_value(cell) is None:
                rows.append((cell, tuple(cells[index + 1 :])))
                break
    return tuple(rows)


def cell_value(cell: str) -> float | None:
    """Number in a table cell; FinQA's ``-2 ( 2 )`` / ``5% ( 5 % )`` cells count as the part before ``(``."""
    value = parse_number(cell)
    if value is None and "(" in cell and not cell.lstrip().startswith(("(", "$(")):
        value = parse_number(cell.split("(", 1)[0])
    return value


def _numeric(cells: tuple[str, ...] | list[str]) -> list[float]:
    return [value for value in map(cell_value, cells) if value is not None]


def find_row_values(text: str, row_name: str) -> list[float] | None:
    """Numeric cells of the first row of any table in ``text`` whose label matches ``row_name``.

    Matching is case-insensitive with whitespace collapsed; when no label matches exactly, a
    second pass ignores punctuation and footnote marks. Rows with no numeric cell are passed
    over. As a last resort a numeric label (a year, say) is matched against the first two
    cells. Returns None when no row matches.
    """
    target = _exact_key(row_name)
    if not target:
        return None
    rows = _labelled_rows(text)
    loose_target = _loose_key(row_name)
    for key, wanted in ((_exact_key, target), (_loose_key, loose_target)):
        if not wanted:
            continue
        for label, rest in rows:
            if key(label) == wanted:
                values = _numeric(rest)
                if values:
                    return values
    for cells in iter_table_rows(text):
        for index, cell in enumerate(cells[:2]):
            if cell and _exact_key(cell) == target:
                values = _numeric(cells[index + 1 :])
                if values:
                    return values
    return None
