"""Lenient parsing of numbers as written in financial reports, tables and model answers.

Accepted string forms (surrounding whitespace ignored, at most 200 characters):

* an optional sign (``+``, ``-``, or a unicode minus/en dash) and an optional currency symbol
  (``$ € £ ¥``) in either order, each followed by optional spaces: ``-$5``, ``$ -5``, ``$ 2457``;
* or an accounting negative: the number in parentheses, optionally with a currency symbol
  inside or before it: ``(1,234)``, ``($ 1,234)``, ``$(1,234)``, ``(12.5%)``; no sign allowed then;
* digits: ``1234``, ``1234.5``, ``.5``, ``5.``, or thousands-grouped ``1,234,567.89`` where the first
  group has 1-3 digits and every later group exactly 3 (``1,23`` and ``12,3456`` are rejected);
  only ASCII digits;
* an optional exponent ``e-3`` / ``E+05``;
* an optional suffix: ``%`` (divides by 100), a scale word ``thousand``/``million``/``billion``/
  ``trillion`` (optionally plural, case-insensitive), or a short scale ``k``, ``m``/``mm``/``mn``,
  ``b``/``bn``, ``tn`` ending the text (case-insensitive, at most one space before it).

Anything else -- dates (``2021-12-12``), ranges (``5-10``), words (``N/A``, ``None``, ``nan``,
``inf``), empty text -- gives None. Results are always finite floats.
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal

__all__ = ["MAX_NUMBER_TEXT", "magnitude_pattern", "normalise_text", "parse_number", "parse_scaled"]

MAX_NUMBER_TEXT = 200

_SCALES = {
    "thousand": 3,
    "million": 6,
    "billion": 9,
    "trillion": 12,
    "k": 3,
    "m": 6,
    "mm": 6,
    "mn": 6,
    "b": 9,
    "bn": 9,
    "tn": 12,
}

# Characters that models and report extractors use in place of ASCII '-' and ' '.
_UNICODE_MAP = str.maketrans(
    {
        "\u2212": "-",  # minus sign
        "\u2012": "-",  # figure dash
        "\u2013": "-",  # en dash
        "\ufe63": "-",  # small hyphen-minus
        "\uff0d": "-",  # fullwidth hyphen-minus
        "\u00a0": " ",  # no-break space
        "\u2007": " ",  # figure space
        "\u2009": " ",  # thin space
        "\u202f": " ",  # narrow no-break space
    }
)

_CURRENCY = "$€£¥"


def normalise_text(text: str) -> str:
    """Map unicode minus/dash and space variants to their ASCII counterparts."""
    return text.translate(_UNICODE_MAP)


def magnitude_pattern(grouping: bool = True) -> str:
    """Regex source for an unsigned number with optional currency prefix and %/scale suffix.

    With ``grouping`` a comma belongs to the number only when it follows a leading group of
    1-3 digits and is itself followed by exactly three digits and then a non-digit.
    Named groups: ``digits``, ``exp``, ``pct``, ``word``, ``short``.
    """
    plain = r"[0-9]+"
    integer = rf"(?:[0-9]{{1,3}}(?:,[0-9]{{3}}(?![0-9]))+|{plain})" if grouping else plain
    return (
        rf"(?:[{_CURRENCY}]\s*)?"
        rf"(?P<digits>{integer}(?:\.[0-9]*)?|\.[0-9]+)"
        r"(?P<exp>[eE][+-]?[0-9]+)?"
        r"(?:\s*(?P<pct>%)"
        r"|\s*(?P<word>thousand|million|billion|trillion)s?\b"
        r"|\s?(?P<short>mn|mm|bn|tn|k|m|b)\b)?"
    )


_MAGNITUDE = re.compile(magnitude_pattern(), re.IGNORECASE)
_PREFIX = re.compile(rf"(?:(?P<s1>[+-])\s*)?(?:[{_CURRENCY}]\s*)?(?:(?P<s2>[+-])\s*)?")


def _scale_of(match: re.Match[str]) -> int:
    """The power of ten a match's suffix stands for (-2 for a percent sign, 0 for none)."""
    if match.group("pct"):
        return -2
    suffix = match.group("word") or match.group("short")
    return _SCALES[suffix.lower()] if suffix else 0


def magnitude_value(match: re.Match[str]) -> float | None:
    """Value of a match of :func:`magnitude_pattern`, or None when it is not a finite float."""
    try:
        value = Decimal(match.group("digits").replace(",", "") + (match.group("exp") or ""))
        result = float(value.scaleb(_scale_of(match)))
    except (ArithmeticError, ValueError):  # decimal.InvalidOperation is an ArithmeticError
        return None
    return result if math.isfinite(result) else None


def parse_scaled(text: str) -> tuple[Decimal, int] | None:
    """A number as written and the power of ten of its scale, or None: ``"$533 million"`` is (533, 6),
    ``"(1,212)"`` is (-1212, 0), ``"93.5%"`` is (93.5, -2). The same forms as :func:`parse_number`, whose value
    is the first scaled by the second."""
    text = normalise_text(text).strip()
    if not text or len(text) > MAX_NUMBER_TEXT:
        return None
    prefix = _PREFIX.match(text)
    if prefix is None:  # cannot happen: every part of _PREFIX is optional
        return None
    sign1, sign2 = prefix.group("s1"), prefix.group("s2")
    if sign1 and sign2:
        return None
    rest = text[prefix.end() :]
    negative = (sign1 or sign2) == "-"
    if rest.startswith("(") and rest.endswith(")"):
        if sign1 or sign2:
            return None
        rest = rest[1:-1].strip()
        negative = True
    match = _MAGNITUDE.fullmatch(rest)
    if match is None or magnitude_value(match) is None:
        return None
    written = Decimal(match.group("digits").replace(",", "") + (match.group("exp") or ""))
    return (-written if negative else written), _scale_of(match)


def _parse_text(text: str) -> float | None:
    scaled = parse_scaled(text)
    if scaled is None:
        return None
    written, power = scaled
    return float(written.scaleb(power))


def parse_number(value: object) -> float | None:
    """Return ``value`` as a finite float, or None when it is not a number.

    Real numbers (not bools) pass through; strings are read leniently (see the module
    docstring); every other type gives None. Never raises.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return _parse_text(value)
    if isinstance(value, (numbers.Real, Decimal)):
        try:
            result = float(value)
        except (OverflowError, ValueError, TypeError):
            return None
        return result if math.isfinite(result) else None
    return None
