"""Pull the answer JSON object out of raw model text.

Strategy:

1. Scan every ``{`` left to right with ``json.JSONDecoder(strict=False).raw_decode`` (strict=False
   lets raw newlines inside strings through). A decoded object is a candidate and scanning
   resumes after it, so objects nested inside a candidate are not candidates themselves.
2. Where decoding fails and the brace has a partner ``}``, that span gets a light repair and is
   decoded again: single-quoted strings become double-quoted, bare-word keys get quoted, Python
   ``None``/``True``/``False`` become ``null``/``true``/``false``, and commas directly before
   ``}`` or ``]`` are dropped.
3. The answer is the last candidate holding any of the three keys (looked up case-insensitively,
   with spaces/hyphens read as underscores, also one level down, e.g. ``{"answer": {...}}``).
4. If no candidate holds a key, ``"key": value`` pairs are looked for with regular expressions,
   which copes with truncated output (a value whose closing quote was cut off is dropped);
   ``json_ok`` is then False. Failing that, the last decoded object (if any) is used, with
   ``json_ok`` True and empty fields.

Work is bounded: only the last 100,000 characters are read, at most 2,000 braces that do not
start valid JSON are tried, and repairs cover at most 1,000,000 characters in all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ANSWER_KEYS", "ParsedAnswer", "decode_objects", "extract_answer"]

ANSWER_KEYS = ("reasoning_steps", "final_formula", "computed_formula")
NULL_WORDS = frozenset({"", "none", "n/a", "null"})

_MAX_TEXT = 100_000
_MAX_FAILED_STARTS = 2_000
_MAX_REPAIR_CHARS = 1_000_000
_DECODER = json.JSONDecoder(strict=False)
_PYTHON_WORDS = {"None": "null", "True": "true", "False": "false"}


@dataclass(frozen=True)
class ParsedAnswer:
    """Fields of the model's answer object; ``json_ok`` says whether they came from real JSON."""

    json_ok: bool = False
    reasoning_steps: tuple[str, ...] = ()
    final_formula: str | None = None
    computed_formula: str | None = None


def _matching_braces(text: str) -> dict[int, int]:
    """Map each ``{`` to its partner ``}`` in one pass; quotes are honoured inside braces only."""
    partners: dict[int, int] = {}
    stack: list[int] = []
    quote = ""
    escaped = False
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char == "{":
            stack.append(index)
        elif char == "}":
            if stack:
                partners[stack.pop()] = index
        elif stack and char in "\"'":
            quote = char
    return partners


def _repair(span: str) -> str:
    """Rewrite common non-JSON slips in ``span`` (see the module docstring)."""
    out: list[str] = []
    index, length = 0, len(span)
    while index < length:
        char = span[index]
        if char in "\"'":
            end = index + 1
            while end < length and span[end] != char:
                end += 2 if span[end] == "\\" else 1
            body = span[index + 1 : min(end, length)]
            if char == "'":
                body = re.sub(r'(?<!\\)"', r'\\"', body.replace("\\'", "'"))
            out.append('"' + body + '"')
            index = end + 1
        elif char.isalpha():
            end = index
            while end < length and (span[end].isalnum() or span[end] == "_"):
                end += 1
            word = span[index:end]
            after = end
            while after < length and span[after].isspace():
                after += 1
            if after < length and span[after] == ":":
                out.append('"' + word + '"')  # a bare key
            else:
                out.append(_PYTHON_WORDS.get(word, word))
            index = end
        elif char == ",":
            end = index + 1
            while end < length and span[end].isspace():
                end += 1
            if end < length and span[end] in "}]":
                index = end
            else:
                out.append(char)
                index += 1
        else:
            out.append(char)
            index += 1
    return "".join(out)


def decode_objects(text: str) -> list[dict[str, object]]:
    """Every top-level JSON object found in ``text``, in order (see the module docstring)."""
    objects: list[dict[str, object]] = []
    partners: dict[int, int] | None = None
    repair_budget = _MAX_REPAIR_CHARS
    position = text.find("{")
    failures = 0
    while position >= 0 and failures < _MAX_FAILED_STARTS:
        try:
            value, next_from = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):  # JSONDecodeError, a huge int literal, deep nesting
            failures += 1
            value, next_from = None, position + 1
            if partners is None:
                partners = _matching_braces(text)
            close = partners.get(position)
            if close is not None and close - position < repair_budget:
                repair_budget -= close - position
                try:
                    value = _DECODER.decode(_repair(text[position : close + 1]))
                    next_from = close + 1
                except (ValueError, RecursionError):
                    pass
        if isinstance(value, dict):
            objects.append(value)
        else:
            next_from = position + 1
        position = text.find("{", next_from)
    return objects


def _normalise_key(key: object) -> str:
    return str(key).strip().lower().replace(" ", "_").replace("-", "_")


def _answer_fields(obj: Mapping[str, object]) -> dict[str, object] | None:
    """The answer keys of ``obj`` (or of a dict directly inside it), or None if there are none."""
    for candidate in (obj, *(v for v in obj.values() if isinstance(v, Mapping))):
        fields = {_normalise_key(k): v for k, v in candidate.items()}
        if any(key in fields for key in ANSWER_KEYS):
            return fields
    return None


def _clean_scalar(value: object) -> str | None:
    """A formula/answer field as text; None for null-like values."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        # A multi-step program written as a list of steps.
        parts = [_clean_scalar(item) for item in value]
        return _clean_scalar(", ".join(part for part in parts if part))
    if not isinstance(value, str):
        return None
    text = value.strip()
    return None if text.lower() in NULL_WORDS else text


def _step_text(item: object) -> str:
    if isinstance(item, str):
        return item.strip()
    try:
        return json.dumps(item, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # absurdly deep nesting
        return ""


def _clean_steps(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    steps = []
    for item in items:
        if item is None:
            continue
        text = _step_text(item)
        if text:
            steps.append(text)
    return tuple(steps)


def _from_fields(fields: Mapping[str, object], json_ok: bool) -> ParsedAnswer:
    return ParsedAnswer(
        json_ok=json_ok,
        reasoning_steps=_clean_steps(fields.get("reasoning_steps")),
        final_formula=_clean_scalar(fields.get("final_formula")),
        computed_formula=_clean_scalar(fields.get("computed_formula")),
    )


# Only complete quoted strings count: an unterminated one (output cut off mid-value) gives "".
_DOUBLE = r'"((?:[^"\\]|\\.)*)"'
_SINGLE = r"'((?:[^'\\]|\\.)*)'"
_BARE = r"([^\n\"'}]*)"


def _key_pattern(key: str) -> re.Pattern[str]:
    return re.compile(
        rf"(?<![A-Za-z0-9_])[\"']?{key}[\"']?\s*:\s*(?:{_DOUBLE}|{_SINGLE}|{_BARE})",
        re.IGNORECASE | re.MULTILINE,
    )


_KEY_PATTERNS = {key: _key_pattern(key) for key in ("final_formula", "computed_formula")}
_STEPS_START = re.compile(r"[\"']?reasoning_steps[\"']?\s*:\s*\[", re.IGNORECASE)
_STEP_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _unescape(body: str) -> str:
    try:
        return json.loads('"' + body + '"', strict=False)
    except ValueError:
        return body


def _regex_fields(text: str) -> dict[str, object]:
    """Best-effort ``key: value`` pairs from text that holds no usable JSON object."""
    fields: dict[str, object] = {}
    for key, pattern in _KEY_PATTERNS.items():
        matches = list(pattern.finditer(text))
        if not matches:
            continue
        double, single, bare = matches[-1].groups()
        if double is not None:
            fields[key] = _unescape(double)
        elif single is not None:
            fields[key] = single.replace("\\'", "'")
        else:
            fields[key] = bare.strip().rstrip(",").strip()
    starts = list(_STEPS_START.finditer(text))
    if starts:
        tail = text[starts[-1].end() :]
        steps: list[str] = []
        previous_end = 0
        for match in _STEP_STRING.finditer(tail):
            if "]" in tail[previous_end : match.start()]:
                break
            steps.append(_unescape(match.group(1)))
            previous_end = match.end()
        fields["reasoning_steps"] = steps
    return fields


def extract_answer(text: str) -> ParsedAnswer:
    """Parse the answer object out of raw model output. Never raises.

    See the module docstring for how the object is found and repaired. Null-like field values
    (missing, empty, ``None``, ``none``, ``N/A``, ``null``) become None; JSON numbers become text.
    """
    if not isinstance(text, str):
        return ParsedAnswer()
    text = text[-_MAX_TEXT:]
    objects = decode_objects(text)
    for obj in reversed(objects):
        fields = _answer_fields(obj)
        if fields is not None:
            return _from_fields(fields, json_ok=True)
    fields = _regex_fields(text)
    if fields:
        return _from_fields(fields, json_ok=False)
    return ParsedAnswer(json_ok=bool(objects))
