"""Token ids for an encoder, made ahead of the model and packed into batches by a token budget.

A GPU encoder is fast enough that tokenizing between its batches leaves it idle most of the time. Here a worker
thread tokenizes the next chunk of texts while the model runs on the current one (the Rust tokenizer releases the
GIL and uses every core), and sorts each chunk by length and cuts it into batches of at most `tokens_per_batch`
padded tokens, so short texts travel in large batches and long ones in small batches. Callers put results back in
input order with `TokenBatch.rows`.

Texts are cut to a character bound before tokenizing when that cannot change the ids: a cut text's ids are kept
only when they fill the model's window and its last kept token ends before the cut text's last whitespace (so every
word it covers is whole); otherwise the full text is tokenized.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

#: Characters per token of the cut: above what a window of text needs (T2-RAGBench contexts in WordPiece: median 4.3,
#: 99th percentile 6.1, at most 6.8 over their first 256 tokens). The cut only saves work (12 tokenized three times
#: the text needed); the few texts whose cut would change their ids are tokenized again in full.
CHARS_PER_TOKEN_BOUND = 6


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


class WindowTokenizer:
    """A fast tokenizer cut to one model window: texts in, the ids `tokenizer(texts, truncation=True,
    max_length=max_length)` gives, out.

    It calls the Rust tokenizer directly: the Python wrapper's conversion of every encoding (offsets included) cost
    more than the tokenizing itself (on 16 cores, 6,400 against 15,600 contexts/s at 256 tokens).
    """

    def __init__(self, tokenizer, max_length: int):
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise ValueError(
                f"{type(tokenizer).__name__} is not a fast tokenizer; token ids made ahead need one "
                "(set tokenize_ahead: false)"
            )
        self.max_length = max_length
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.token_types = "token_type_ids" in tokenizer.model_input_names
        # A copy: the tokenizer's own calls reset truncation and padding on the one it shares with the model.
        self._backend = copy.deepcopy(backend)
        self._backend.enable_truncation(
            max_length, stride=0, strategy="longest_first", direction=tokenizer.truncation_side
        )
        self._backend.no_padding()

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, cutting long texts first where the ids stay the same."""
        bound = self.max_length * CHARS_PER_TOKEN_BOUND
        cut = [t[:bound] for t in texts]
        encodings = self._backend.encode_batch(cut)
        ids = [e.ids for e in encodings]
        redo = [i for i, text in enumerate(texts) if len(text) > bound and not self._cut_is_safe(cut[i], encodings[i])]
        if redo:
            for i, encoding in zip(redo, self._backend.encode_batch([texts[i] for i in redo]), strict=True):
                ids[i] = encoding.ids
        return ids

    def _cut_is_safe(self, cut: str, encoding) -> bool:
        if len(encoding) < self.max_length:
            return False  # the cut text did not fill the window: the full text has more to give
        for j in range(len(encoding) - 1, -1, -1):  # the last token with characters (special tokens have none)
            span = encoding.token_to_chars(j)
            if span is not None and span[1] > span[0]:
                return span[1] <= max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
        return False

    def pack(self, ids: Sequence[Sequence[int]], positions: np.ndarray, tokens_per_batch: int) -> Iterator[TokenBatch]:
        """`pack` with this tokenizer's padding id and token types."""
        return pack(ids, positions, tokens_per_batch, self.pad_id, self.token_types)


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
    window: WindowTokenizer, texts: Sequence[str], tokens_per_batch: int, chunk_rows: int = 4096
) -> Iterator[TokenBatch]:
    """Batches of token ids for all texts, the next chunk tokenized and packed in a worker thread while the caller
    runs the model on the batches of the chunk before. Chunks grow from 512 rows to `chunk_rows`, so the model
    starts after a small first chunk rather than waiting for a full one."""
    chunks, start, size = [], 0, min(512, chunk_rows)
    while start < len(texts):
        chunks.append(range(start, min(start + size, len(texts))))
        start, size = start + size, min(2 * size, chunk_rows)

    def packed(chunk: range) -> list[TokenBatch]:
        ids = window([texts[i] for i in chunk])
        return list(window.pack(ids, np.arange(chunk.start, chunk.stop), tokens_per_batch))

    for batches in prefetched(packed, chunks):
        yield from batches
