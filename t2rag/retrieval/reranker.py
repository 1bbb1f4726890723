"""The cross-encoder that re-scores a question's candidates (3 x k by default, as in the paper); the `rerank` stage
(t2rag/stages/rerank.py) applies it.

On CUDA the pairs are tokenized one batch ahead in a worker thread (sentence-transformers' own `preprocess`, so the
ids and padding are exactly those of `CrossEncoder.predict`) while the model scores the batch before, in bf16. On CPU
`predict` itself runs: tokenizer and model would compete for the same cores, and its scores stay bit-identical.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict

from t2rag.data.corpus import Corpus
from t2rag.model_access import loading
from t2rag.model_loads import record_load
from t2rag.retrieval.base import Hits
from t2rag.retrieval.dense.embedder import default_device, model_dtype, resolve_model_path
from t2rag.retrieval.dense.token_batches import prefetched
from t2rag.retrieval.ranking import top_n

log = logging.getLogger(__name__)


class RerankerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    num_labels: int | None = None  # set 1 to load a plain encoder with a fresh scoring head (tests only)
    candidate_factor: int = 3
    batch_size: int = 32
    max_length: int = 512
    device: str | None = None  # None: CUDA when available, else CPU
    dtype: str | None = None  # None: bfloat16 on CUDA, float32 elsewhere
    #: Tokenize the next batch in a thread while the model scores this one. None: on CUDA only (see above).
    tokenize_ahead: bool | None = None


@lru_cache(maxsize=2)
def _load_cross_encoder(name: str, path: str, num_labels: int | None, max_length: int, device: str, dtype: str | None):
    import torch
    from sentence_transformers import CrossEncoder

    kwargs = {
        "max_length": max_length,
        "device": device,
        "model_kwargs": {"torch_dtype": getattr(torch, model_dtype(device, dtype))},
    }
    with loading(name, path):
        if not num_labels:
            model = CrossEncoder(path, **kwargs)
        else:
            # A fresh scoring head is random: seed it so every process (driver, actors, replicas) builds the same.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                model = CrossEncoder(path, num_labels=num_labels, **kwargs)
    record_load(name)
    return model


class CrossEncoderScorer:
    """Scores (question, passage) pairs with a cross-encoder; all pairs of a block go in one call."""

    def __init__(self, config: RerankerConfig | None = None):
        self.config = config or RerankerConfig()
        c = self.config
        device = c.device or default_device()
        self.model = _load_cross_encoder(
            c.model, resolve_model_path(c.model), c.num_labels, c.max_length, device, c.dtype
        )
        self.tokenize_ahead = device.startswith("cuda") if c.tokenize_ahead is None else c.tokenize_ahead

    def score(self, questions: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        """One score per (question, passage) pair: the model's last label after its activation."""
        if not questions:
            return np.zeros(0)
        pairs = list(zip(questions, passages, strict=True))
        if self.tokenize_ahead:
            out = self._score_ahead(pairs)
        else:
            out = self.model.predict(
                pairs, batch_size=self.config.batch_size, show_progress_bar=False, convert_to_numpy=True
            )
        return np.asarray(out, dtype=np.float64).reshape(len(pairs), -1)[:, -1]

    def _score_ahead(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """Longest pairs first in batches of batch_size, each tokenized while the batch before is scored."""
        import torch
        from sentence_transformers.util import batch_to_device

        order = np.argsort([-(len(q) + len(p)) for q, p in pairs], kind="stable")
        size = self.config.batch_size
        batches = [order[s : s + size] for s in range(0, len(order), size)]
        out = np.empty((len(pairs), max(self.model.num_labels, 1)), dtype=np.float32)
        model, activation = self.model, self.model.activation_fn
        with torch.inference_mode():
            work = prefetched(lambda rows: (rows, model.preprocess([pairs[i] for i in rows])), batches)
            for rows, features in work:
                scores = model(batch_to_device(features, model.device))["scores"].float()
                if activation is not None:
                    scores = activation(scores)
                out[rows] = scores.reshape(len(rows), -1).cpu().numpy()
        return out

    def rerank(self, questions: Sequence[str], candidates: Hits, corpus: Corpus, n: int) -> Hits:
        """Re-score every candidate and keep the n best per question (ties: candidate order)."""
        rows, cols = np.nonzero(candidates.indices >= 0)
        docs = candidates.indices[rows, cols]
        scores = np.full(candidates.indices.shape, -np.inf)
        scores[rows, cols] = self.score([questions[r] for r in rows], [corpus.texts[d] for d in docs])
        # top_n breaks ties by column, i.e. by the candidates' order.
        order, best = top_n(scores, min(n, candidates.indices.shape[1]), valid=candidates.indices >= 0)
        indices = np.where(order >= 0, np.take_along_axis(candidates.indices, np.maximum(order, 0), axis=1), -1)
        return Hits(indices, best)
