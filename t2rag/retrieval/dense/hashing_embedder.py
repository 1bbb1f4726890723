"""A deterministic hashing embedder for timing-only corpora (`model: hashing`): no weights, no training.

Each lowercased whitespace token adds +1 or -1 (by a second hash bit) to one of `dim` dimensions chosen by its
CRC-32; the vector is L2-normalised. Cosine similarity then measures shared tokens, so a dense index and its ANN
recall behave like a lexical one. It carries no meaning beyond that: results built on it are for timing and memory,
never for quality tables.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from t2rag.tokenize import whitespace_tokenize

HASHING_MODEL = "hashing"


class HashingEmbedder:
    """The `Embedder` interface over feature hashing (templates are ignored: queries and passages hash alike)."""

    def __init__(self, config, dim: int = 384):
        self.config = config
        self.dim = dim
        self._slots: dict[str, tuple[int, float]] = {}

    def _slot(self, token: str) -> tuple[int, float]:
        slot = self._slots.get(token)
        if slot is None:
            h = zlib.crc32(token.encode())
            slot = self._slots[token] = (h % self.dim, 1.0 if (h >> 31) & 1 else -1.0)
        return slot

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            slots = [self._slot(token) for token in whitespace_tokenize(text)]
            if slots:
                index, sign = zip(*slots, strict=True)
                out[row] = np.bincount(index, weights=sign, minlength=self.dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)
