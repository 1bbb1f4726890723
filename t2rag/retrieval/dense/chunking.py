"""Split contexts into overlapping chunks that fit an embedder's window, keeping table rows whole.

T2-RAGBench contexts average about 950 tokens; all-MiniLM-L6-v2 reads 256 of them (e5 512), so an unchunked dense
index never sees most tables. A context is cut at line boundaries (a markdown table row is one line) into chunks
of at most `max_tokens` tokens; consecutive chunks share up to `overlap_tokens` of trailing lines; a chunk that
starts inside a table repeats the table's header (its first line and the `|---|` rule) so its columns stay named;
only a line longer than a whole chunk is cut inside, at word boundaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

#: Token counts of a batch of lines (without special tokens).
CountTokens = Callable[[list[str]], list[int]]


class ChunkingConfig(BaseModel):
    """How contexts are cut for chunked dense retrieval; `max_tokens` None: the embedder's window less 2 (the
    model's start and end tokens) less the passage template."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(None, ge=16)
    overlap_tokens: int = Field(32, ge=0)
    table_header: bool = True  # repeat a table's header in every chunk that starts inside it

    @property
    def cache_key(self) -> str:
        return f"chunks{self.max_tokens or 'w'}o{self.overlap_tokens}{'h' if self.table_header else ''}"


@dataclass(frozen=True)
class Chunks:
    """Chunk texts and the position of the context each comes from (contexts in order, chunks in order)."""

    texts: list[str]
    doc: np.ndarray  # int64, one per chunk


def whitespace_counts(lines: list[str]) -> list[int]:
    return [len(line.split()) for line in lines]


def chunk_texts(
    texts: Sequence[str],
    max_tokens: int,
    overlap_tokens: int = 32,
    table_header: bool = True,
    count: CountTokens = whitespace_counts,
) -> Chunks:
    """Chunks of every text (at least one per text, even an empty one)."""
    if overlap_tokens >= max_tokens:
        raise ValueError(f"overlap_tokens {overlap_tokens} must be below max_tokens {max_tokens}")
    split = [text.split("\n") for text in texts]
    flat = [line for lines in split for line in lines]
    sizes = count(flat) if flat else []
    out: list[str] = []
    doc: list[int] = []
    at = 0
    for d, lines in enumerate(split):
        pieces = _pack(lines, sizes[at : at + len(lines)], max_tokens, overlap_tokens, table_header)
        at += len(lines)
        out += pieces
        doc += [d] * len(pieces)
    return Chunks(out, np.asarray(doc, dtype=np.int64))


def _pack(lines: list[str], sizes: list[int], budget: int, overlap: int, table_header: bool) -> list[str]:
    units = _units(lines, sizes, budget)
    headers = _table_headers(lines) if table_header else {}
    chunks: list[str] = []
    start = 0
    while start < len(units):
        header = headers.get(units[start][2])
        head = [] if header is None else [lines[i] for i in header]
        used = sum(sizes[i] for i in header) if header else 0
        if header is not None and used > budget // 2:  # a huge header is not worth repeating
            head, used = [], 0
        end = start
        while end < len(units) and (end == start or used + units[end][1] <= budget):
            used += units[end][1]
            end += 1
        chunks.append("\n".join(head + [u[0] for u in units[start:end]]))
        if end >= len(units):
            break
        back, kept = end, 0  # the next chunk begins with up to `overlap` tokens of this one's last units
        while back - 1 > start and kept + units[back - 1][1] <= overlap:
            back -= 1
            kept += units[back][1]
        start = back
    return chunks or [""]


def _units(lines: list[str], sizes: list[int], budget: int) -> list[tuple[str, int, int]]:
    """(text, tokens, line number) per line; a line over the budget is cut into word runs that fit."""
    units = []
    for i, (line, size) in enumerate(zip(lines, sizes, strict=True)):
        if size <= budget:
            units.append((line, size, i))
            continue
        words = line.split()
        per = max(1, int(len(words) * budget / max(size, 1)))  # tokens per word, estimated from the whole line
        for w in range(0, len(words), per):
            part = words[w : w + per]
            units.append((" ".join(part), int(np.ceil(size * len(part) / len(words))), i))
    return units


def _table_headers(lines: list[str]) -> dict[int, tuple[int, ...]]:
    """For every line of a markdown table past its header, the header's line numbers (header row and rule)."""
    headers: dict[int, tuple[int, ...]] = {}
    i = 0
    while i < len(lines):
        if _is_row(lines[i]) and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            header = (i, i + 1)
            j = i + 2
            while j < len(lines) and _is_row(lines[j]):
                headers[j] = header
                j += 1
            i = j
        else:
            i += 1
    return headers


def _is_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def _is_rule(line: str) -> bool:
    return _is_row(line) and set(line.replace("|", "").replace(":", "").strip()) <= {"-"} and "-" in line
