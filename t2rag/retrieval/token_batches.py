"""Token ids for an encoder, made ahead of the model and packed into batches by a token budget.

A GPU encoder is fast enough that tokenizing between its batches leaves it idle most of the time. Here a worker
thread tokenizes the next chunk of texts while the model runs on the current one (the fast tokenizers release the
GIL), and each chunk is sorted by length and cut into batches of at most `tokens_per_batch` padded tokens, so short
texts travel in large batches and long ones in small batches. Callers put results back in input order with
`TokenBatch.rows`.

Texts are cut to a character bound before tokenizing when that cannot change the ids: a cut text's ids are kept
only when they fill the model's window and its last kept token ends before the cut text's last whitespace (so every
word it covers is whole); otherwise the full text is tokenized.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

#: Characters per token above any real tokenizer's average on text (T2-RAGBench: about 4 for WordPiece); the cut
#: only saves work, and a text whose cut would change its ids is tokenized in full.
CHARS_PER_TOKEN_BOUND = 12


@dataclass(frozen=True)
class TokenBatch:
    """Padded token ids of some inputs: `rows` are their positions in the caller's sequence."""

    rows: np.ndarray
    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray | None


def tokenize(tokenizer, texts: Sequence[str], max_length: int) -> list[dict[str, list[int]]]:
    """Each text's ids (truncated to max_length), cutting long texts first where the ids stay the same."""
    bound = max_length * CHARS_PER_TOKEN_BOUND
    cut = [t[:bound] for t in texts]
    encoded = tokenizer(cut, truncation=True, max_length=max_length, return_offsets_mapping=True)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded]
    rows = [{k: encoded[k][i] for k in keys} for i in range(len(texts))]
    redo = [
        i
        for i, text in enumerate(texts)
        if len(text) > bound and not _cut_is_safe(cut[i], encoded["offset_mapping"][i], max_length)
    ]
    if redo:
        full = tokenizer([texts[i] for i in redo], truncation=True, max_length=max_length)
        for j, i in enumerate(redo):
            rows[i] = {k: full[k][j] for k in keys}
    return rows


def _cut_is_safe(cut: str, offsets: Sequence[tuple[int, int]], max_length: int) -> bool:
    if len(offsets) < max_length:
        return False  # the cut text did not fill the window: the full text has more to give
    ends = [end for start, end in offsets if end > start]  # special tokens have empty spans
    last_space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    return bool(ends) and ends[-1] <= last_space


def pack(rows: list[dict[str, list[int]]], positions: np.ndarray, tokens_per_batch: int, pad_id: int):
    """Length-sorted batches (longest first) of at most tokens_per_batch padded tokens each."""
    lengths = np.array([len(r["input_ids"]) for r in rows])
    order = np.argsort(-lengths, kind="stable")
    start = 0
    while start < len(order):
        width = int(lengths[order[start]])  # the longest of this batch: every later row is no longer
        size = max(1, tokens_per_batch // max(width, 1))
        chosen = order[start : start + size]
        yield _padded([rows[i] for i in chosen], positions[chosen], width, pad_id)
        start += size


def _padded(rows: list[dict[str, list[int]]], positions: np.ndarray, width: int, pad_id: int) -> TokenBatch:
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    types = np.zeros((len(rows), width), dtype=np.int64) if "token_type_ids" in rows[0] else None
    for i, row in enumerate(rows):
        n = len(row["input_ids"])
        ids[i, :n] = row["input_ids"]
        mask[i, :n] = 1
        if types is not None:
            types[i, :n] = row["token_type_ids"]
    return TokenBatch(positions, ids, mask, types)


def token_batches(
    tokenizer, texts: Sequence[str], max_length: int, tokens_per_batch: int, chunk_rows: int = 4096
) -> Iterator[TokenBatch]:
    """Batches of token ids for all texts, one chunk tokenized ahead in a worker thread while the caller runs the
    model on the batches of the chunk before."""
    chunks = [range(s, min(s + chunk_rows, len(texts))) for s in range(0, len(texts), chunk_rows)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenize") as pool:

        def submit(chunk: range):
            return pool.submit(tokenize, tokenizer, [texts[i] for i in chunk], max_length)

        ahead = submit(chunks[0]) if chunks else None
        for n, chunk in enumerate(chunks):
            rows = ahead.result()
            if n + 1 < len(chunks):  # one chunk ahead at most: memory stays bounded
                ahead = submit(chunks[n + 1])
            yield from pack(rows, np.arange(chunk.start, chunk.stop), tokens_per_batch, pad_id)
