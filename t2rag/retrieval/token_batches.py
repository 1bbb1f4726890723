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

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

#: Characters per token above any real tokenizer's average on text (T2-RAGBench: about 4 for WordPiece); the cut
#: only saves work, and a text whose cut would change its ids is tokenized in full.
CHARS_PER_TOKEN_BOUND = 12


T = TypeVar("T")
R = TypeVar("R")


def prefetched(work: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """work(item) for each item in order, the next one computed in a worker thread while the caller uses the
    current one. One result ahead at most, so memory stays bounded."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch") as pool:
        ahead = None
        for item in items:
            future = pool.submit(work, item)
            if ahead is not None:
                yield ahead.result()
            ahead = future
        if ahead is not None:
            yield ahead.result()


@dataclass(frozen=True)
class TokenBatch:
    """Padded token ids of some inputs: `rows` are their positions in the caller's sequence."""

    rows: np.ndarray
    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray | None


def tokenize(tokenizer, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Each text's ids (truncated to max_length), cutting long texts first where the ids stay the same."""
    bound = max_length * CHARS_PER_TOKEN_BOUND
    cut = [t[:bound] for t in texts]
    encoded = tokenizer(cut, truncation=True, max_length=max_length, return_offsets_mapping=True)
    ids = encoded["input_ids"]
    redo = [
        i
        for i, text in enumerate(texts)
        if len(text) > bound and not _cut_is_safe(cut[i], encoded["offset_mapping"][i], max_length)
    ]
    if redo:
        full = tokenizer([texts[i] for i in redo], truncation=True, max_length=max_length)["input_ids"]
        for j, i in enumerate(redo):
            ids[i] = full[j]
    return ids


def _cut_is_safe(cut: str, offsets: Sequence[tuple[int, int]], max_length: int) -> bool:
    if len(offsets) < max_length:
        return False  # the cut text did not fill the window: the full text has more to give
    ends = [end for start, end in offsets if end > start]  # special tokens have empty spans
    last_space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    return bool(ends) and ends[-1] <= last_space


def pack(ids: Sequence[Sequence[int]], positions: np.ndarray, tokens_per_batch: int, pad_id: int, token_types: bool):
    """Length-sorted batches (longest first) of at most tokens_per_batch padded tokens each. Every real token is
    attended to, and a single text's token types are all 0 (`token_types`: the model takes them)."""
    lengths = np.fromiter((len(r) for r in ids), np.int64, len(ids))
    order = np.argsort(-lengths, kind="stable")
    start = 0
    while start < len(order):
        width = int(lengths[order[start]])  # the longest of this batch: every later row is no longer
        size = max(1, tokens_per_batch // max(width, 1))
        chosen = order[start : start + size]
        input_ids = np.full((len(chosen), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(chosen), width), dtype=np.int64)
        for i, row in enumerate(chosen):
            input_ids[i, : lengths[row]] = ids[row]
            mask[i, : lengths[row]] = 1
        types = np.zeros_like(input_ids) if token_types else None
        yield TokenBatch(positions[chosen], input_ids, mask, types)
        start += size


def token_batches(
    tokenizer, texts: Sequence[str], max_length: int, tokens_per_batch: int, chunk_rows: int = 4096
) -> Iterator[TokenBatch]:
    """Batches of token ids for all texts, one chunk tokenized ahead in a worker thread while the caller runs the
    model on the batches of the chunk before."""
    chunks = [range(s, min(s + chunk_rows, len(texts))) for s in range(0, len(texts), chunk_rows)]

    def tokenized(chunk: range) -> tuple[range, list[list[int]]]:
        return chunk, tokenize(tokenizer, [texts[i] for i in chunk], max_length)

    for chunk, ids in prefetched(tokenized, chunks):
        yield from pack_for(tokenizer, ids, np.arange(chunk.start, chunk.stop), tokens_per_batch)


def pack_for(tokenizer, ids: Sequence[Sequence[int]], positions: np.ndarray, tokens_per_batch: int):
    """`pack` with the tokenizer's padding id and token types."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return pack(ids, positions, tokens_per_batch, pad_id, "token_type_ids" in tokenizer.model_input_names)
