"""JSON Lines: one JSON object per non-empty line (predictions files, leaderboard submissions)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from t2rag.errors import InputError


def read_objects(data: bytes, origin: str) -> list[dict]:
    """The objects of a JSON Lines file; `origin` names it in errors (`origin:line: reason`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{origin}: not UTF-8 text (byte {exc.start})") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{origin}:{n}: not valid JSON ({exc.msg})") from exc
        if not isinstance(row, dict):
            raise InputError(f"{origin}:{n}: each line must be a JSON object")
        rows.append(row)
    return rows


def dump_objects(rows: Iterable[dict]) -> bytes:
    """One compact JSON object per line, UTF-8."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
