"""The years a text names (four digits, 1900 to 2099, standing alone): read once from a question and shared by the
metadata prior's year features and page evidence's `row_years`, and from a table's header cells."""

from __future__ import annotations

import re
from collections.abc import Iterable

YEAR = re.compile(r"\b(?:19|20)\d\d\b")
#: The years a `year_mask` holds: FIRST_YEAR and the 63 after it.
FIRST_YEAR = 1980


def years_named(text: str) -> frozenset[int]:
    """The years a text names."""
    return frozenset(int(y) for y in YEAR.findall(text))


def mask_of(years: Iterable[int]) -> int:
    """The years from FIRST_YEAR to FIRST_YEAR + 63 among `years`, as the bits of a 64-bit mask."""
    mask = 0
    for year in years:
        if 0 <= year - FIRST_YEAR < 64:
            mask |= 1 << (year - FIRST_YEAR)
    return mask


def year_mask(text: str) -> int:
    """`mask_of` the years a text names."""
    return mask_of(years_named(text))
