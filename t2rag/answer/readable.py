"""The answer a person reads, made from the model's JSON answer as it streams.

The generator answers in JSON (`reasoning_steps`, `final_formula`, `computed_formula`; t2rag.prompts). A chat
client wants prose: the reasoning as numbered steps, the formula, and the number. `ReadableAnswer` takes the
model's text piece by piece and returns, after each piece, the readable text that has become final: a step once
its JSON string is closed, the formula once the steps are done and its string is closed. What it returned never
changes afterwards, so a stream of those increments, plus `finish` (the answer line, or the model's own text where
it wrote no JSON), joins into exactly the text of the non-streamed reply.
"""

from __future__ import annotations

import json
import math
import re

_DECODER = json.JSONDecoder()
_STEPS = re.compile(r'"reasoning_steps"\s*:\s*\[')
_FORMULA = re.compile(r'"final_formula"\s*:\s*')
_SEPARATOR = re.compile(r"\s*,?\s*")


def _strings_from(text: str, start: int) -> tuple[list[str], bool]:
    """The complete JSON strings of the array that begins at `start`, and whether the array is closed."""
    out, at = [], start
    while True:
        at = _SEPARATOR.match(text, at).end()
        if at >= len(text):
            return out, False
        if text[at] == "]":
            return out, True
        try:
            value, at = _DECODER.raw_decode(text, at)
        except ValueError:
            return out, False  # an unfinished (or malformed) item: wait for more text
        out.append(str(value))


def _string_after(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    if match is None:
        return None
    try:
        value, _ = _DECODER.raw_decode(text, match.end())
    except ValueError:
        return None
    return str(value)


def number_text(value: float) -> str:
    """A prediction as a person writes it: no trailing zeros, no exponent for ordinary sizes."""
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


class ReadableAnswer:
    """Readable text from a JSON answer that arrives in pieces (see the module's docstring)."""

    def __init__(self) -> None:
        self.raw = ""
        self.emitted = ""

    def add(self, piece: str) -> str:
        """Take the next piece of the model's text; the readable text that became final with it."""
        self.raw += piece
        return self._advance(self._render(final=False))

    def finish(self, prediction: float | None, formula: str | None) -> str:
        """The rest of the readable text once the model is done: what became final at the end, then the answer."""
        body = self._render(final=True)
        if not body and not self.emitted and self.raw.strip():  # no JSON answer: the model's own words are the reply
            body = self.raw.strip() + "\n"
        tail = self._advance(body)
        if prediction is None:
            answer = "Answer: no number could be read"
        else:
            answer = f"Answer: {number_text(prediction)}"
            if formula and f"Formula: {formula.strip()}" not in self.emitted:
                answer += f" (formula: {formula})"
        return tail + ("\n" if self.emitted else "") + answer

    def _advance(self, rendered: str) -> str:
        """The part of `rendered` not returned yet (renders only ever grow at their end)."""
        new = rendered[len(self.emitted) :] if rendered.startswith(self.emitted) else ""
        self.emitted += new
        return new

    def _render(self, final: bool) -> str:
        lines: list[str] = []
        match = _STEPS.search(self.raw)
        closed = False
        if match is not None:
            steps, closed = _strings_from(self.raw, match.end())
            lines += [f"{i}. {step.strip()}" for i, step in enumerate(steps, 1)]
        formula = _string_after(_FORMULA, self.raw) if closed or final else None
        if formula is not None:
            lines.append(f"Formula: {formula.strip()}")
        return "".join(f"{line}\n" for line in lines)
