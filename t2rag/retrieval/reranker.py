"""The cross-encoder that re-scores a candidate pool (pool = 3 x k by default, as in the paper); the `rerank` stage
(t2rag/stages/rerank.py) applies it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import Hits
from t2rag.retrieval.embedder import resolve_model_path
from t2rag.retrieval.ranking import top_n

log = logging.getLogger(__name__)


class RerankerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    num_labels: int | None = None  # set 1 to load a plain encoder with a fresh scoring head (tests only)
    pool_factor: int = 3
    batch_size: int = 32
    max_length: int = 512
    device: str | None = None


@lru_cache(maxsize=2)
def _load_cross_encoder(path: str, num_labels: int | None, max_length: int, device: str | None):
    import torch
    from sentence_transformers import CrossEncoder

    if not num_labels:
        return CrossEncoder(path, max_length=max_length, device=device)
    # A fresh scoring head is random: seed it so every process (driver, actors, replicas) builds the same one.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return CrossEncoder(path, max_length=max_length, device=device, num_labels=num_labels)


class CrossEncoderScorer:
    """Scores (question, passage) pairs with a cross-encoder; all pairs of a block go in one call."""

    def __init__(self, config: RerankerConfig | None = None):
        self.config = config or RerankerConfig()
        c = self.config
        self.model = _load_cross_encoder(resolve_model_path(c.model), c.num_labels, c.max_length, c.device)

    def score(self, questions: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        if not questions:
            return np.zeros(0)
        pairs = list(zip(questions, passages, strict=True))
        out = self.model.predict(
            pairs, batch_size=self.config.batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return np.asarray(out, dtype=np.float64).reshape(len(pairs), -1)[:, -1]

    def rerank(self, questions: Sequence[str], pool: Hits, corpus: Corpus, n: int) -> Hits:
        """Re-score every candidate of the pool and keep the n best per question (ties: pool order)."""
        rows, cols = np.nonzero(pool.indices >= 0)
        docs = pool.indices[rows, cols]
        scores = np.full(pool.indices.shape, -np.inf)
        scores[rows, cols] = self.score([questions[r] for r in rows], [corpus.texts[d] for d in docs])
        # top_n breaks ties by column, i.e. by dense pool order.
        order, best = top_n(scores, min(n, pool.indices.shape[1]), valid=pool.indices >= 0)
        indices = np.where(order >= 0, np.take_along_axis(pool.indices, np.maximum(order, 0), axis=1), -1)
        return Hits(indices, best)
