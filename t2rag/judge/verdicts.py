"""Reading a judge's reply: which answer it found better (`1`, `2` or `tie`) and its reasoning. A reply that names
neither answer is unparsed: counted and reported, never a win."""

from __future__ import annotations

import re

from t2rag.answer.extract import decode_objects

CHOICES = ("1", "2", "tie")
_BETTER = re.compile(r"""["']?better["']?\s*[:=]\s*["']?\s*(answer\s*)?(1|2|tie)\b""", re.I)


def parse_verdict(text: str | None) -> tuple[str | None, str | None]:
    """(the choice, the reasoning) of a judge's reply; the choice is None when the reply names no answer."""
    if not text:
        return None, None
    for obj in reversed(decode_objects(text)):
        keys = {str(k).lower(): v for k, v in obj.items()}
        choice = _choice(keys.get("better"))
        if choice is not None:
            reasoning = keys.get("reasoning")
            return choice, None if reasoning is None else str(reasoning)
    found = _BETTER.search(text)
    return (found.group(2).lower(), None) if found else (None, None)


def _choice(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    text = str(value).strip().lower().removeprefix("answer").strip() if value is not None else ""
    if isinstance(value, int | float) and value in (1, 2):
        text = str(int(value))
    return text if text in CHOICES else None
