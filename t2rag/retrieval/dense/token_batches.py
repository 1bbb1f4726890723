"""Token ids for an encoder, made ahead of the model and packed into batches by a token budget.

A GPU encoder is fast enough that tokenizing between its batches leaves it idle most of the time. Here a worker
thread tokenizes the next chunk of texts while the model runs on the current one (the Rust tokenizer releases the
GIL and uses every core), and sorts each chunk by length and cuts it into batches of at most `tokens_per_batch`
padded tokens, so short texts travel in large batches and long ones in small batches. Callers put results back in
input order with `TokenBatch.rows`.

Texts are cut to a character bound before tokenizing when that cannot change the ids. For tokenizers that split
words at spaces and normalize without looking across them (BERT's WordPiece, SentencePiece's Metaspace), a text is
cut before the last run of spaces within the bound: the words before a space tokenize the same whatever follows it,
so a cut text whose ids fill the model's window has the full text's ids. Other tokenizers are cut at the bound, and a
cut text's ids are kept only when its last kept token ends before its last whitespace (read from the token offsets,
which take the Rust tokenizer a fifth to a quarter of its time). Either way a cut text that does not fill the window is
tokenized again in full.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

#: Characters per token of the cut: above what a window of text needs (T2-RAGBench contexts in WordPiece: median 4.3,
#: 99th percentile 6.1, at most 6.8 over their first 256 tokens). The cut only saves work (12 tokenized three times
#: the text needed); the few texts whose cut would change their ids are tokenized again in full.
CHARS_PER_TOKEN_BOUND = 6


#: Pre-tokenizers that end a word wherever a space is, and those that only split words further.
_SPLIT_AT_SPACES = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit", "Metaspace"}
_SPLIT_FURTHER = {"Punctuation", "Digits"}
#: Normalizers that map each character (with its combining marks) on its own, never across a space.
_CHARACTER_NORMALIZERS = {"BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "Precompiled"}
#: A Replace pattern (string or regex) that matches runs of spaces and nothing else: " ", " +", " {2,}".
_SPACES_ONLY = re.compile(r"( [+*]?(\{\d+,?\d*\})?)+")

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
        #: None: no cut (left truncation keeps a text's last tokens, which a cut would change)
        self.cut = None
        if tokenizer.truncation_side == "right":
            self.cut = "spaces" if cuts_at_spaces(self._backend) else "offsets"

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, cutting long texts first where the ids stay the same."""
        if self.cut is None:
            return [e.ids for e in self._backend.encode_batch_fast(list(texts))]
        bound = self.max_length * CHARS_PER_TOKEN_BOUND
        if self.cut == "spaces":
            cut = [text if len(text) <= bound else _before_last_spaces(text, bound) for text in texts]
            ids = [e.ids for e in self._backend.encode_batch_fast(cut)]
            redo = [i for i, text in enumerate(texts) if len(cut[i]) < len(text) and len(ids[i]) < self.max_length]
        else:
            cut = [text[:bound] for text in texts]
            encodings = self._backend.encode_batch(cut)
            ids = [e.ids for e in encodings]
            redo = [i for i, t in enumerate(texts) if len(t) > bound and not self._cut_is_safe(cut[i], encodings[i])]
        if redo:
            for i, encoding in zip(redo, self._backend.encode_batch_fast([texts[i] for i in redo]), strict=True):
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


def cuts_at_spaces(backend) -> bool:
    """Whether a text of this Rust tokenizer may be cut before a run of spaces without changing the ids of what
    comes before: its pre-tokenizer ends words at spaces, its normalizer maps characters one by one (or collapses
    spaces), and no added token holds a space."""
    spec = json.loads(backend.to_str())
    pre = spec.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    if any(step.get("type") not in _SPLIT_AT_SPACES | _SPLIT_FURTHER for step in steps):
        return False
    if not any(step["type"] in _SPLIT_AT_SPACES and step.get("split", True) for step in steps):
        return False
    normalizer = spec.get("normalizer") or {"type": "Sequence", "normalizers": []}
    maps = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" else [normalizer]
    for step in maps:
        if step["type"] == "Replace":  # SentencePiece's " {2,}" -> " ": spaces stay spaces
            pattern = step.get("pattern", {})
            if not _SPACES_ONLY.fullmatch(pattern.get("String", pattern.get("Regex", ""))) or step["content"] != " ":
                return False
        elif step["type"] not in _CHARACTER_NORMALIZERS:
            return False
    return not any(" " in token.content for token in backend.get_added_tokens_decoder().values())


def _before_last_spaces(text: str, bound: int) -> str:
    """text up to the last run of spaces that starts within `bound` characters (the whole text when none does)."""
    end = text.rfind(" ", 0, bound + 1)
    while end > 0 and text[end - 1] == " ":
        end -= 1
    return text[:end] if end > 0 else text


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
