"""A dense module plugin, written against `t2rag.extend` alone as docs/plugins.md describes one: cosine similarity
of the question's embedding with each context's, plus a bonus of its own for a context that prints a year the
question names. It loads no model: the question vectors arrive on every block, the passage vectors at `index`."""

from __future__ import annotations

import re

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from t2rag.extend import (
    DENSE,
    Corpus,
    Hits,
    IndexedMixin,
    Method,
    Retriever,
    RetrieverPlugin,
    as_block,
    register,
    result_depth,
)

__version__ = "0.1.0"

YEAR = re.compile(r"\b(?:19|20)[0-9]{2}\b")


class BonusSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bonus: float = Field(0.05, ge=0)  # added to the cosine of a context printing a year the question names


class CosineBonus(IndexedMixin, Retriever):
    name = "cosine_bonus"

    def __init__(self, settings: BonusSettings):
        self.bonus = settings.bonus

    def index(self, corpus: Corpus, vectors=None) -> None:
        if vectors is None:
            raise ValueError("cosine_bonus was indexed without passage vectors")
        vectors = np.asarray(vectors, np.float64)
        self.passages = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        self.years = [set(YEAR.findall(text)) for text in corpus.texts]
        self._corpus = corpus

    def search(self, queries, k, depth=None) -> Hits:
        block = as_block(queries)
        if block.vectors is None:
            raise ValueError("cosine_bonus was searched without query vectors")
        asked = np.asarray(block.vectors, np.float64)
        asked = asked / np.maximum(np.linalg.norm(asked, axis=1, keepdims=True), 1e-12)
        scores = asked @ self.passages.T
        for q, text in enumerate(block.texts):
            named = set(YEAR.findall(text))
            scores[q] += self.bonus * np.array([bool(named & years) for years in self.years])
        n, take = result_depth(k, depth), min(result_depth(k, depth), len(self.corpus))
        indices, out = np.full((len(block), n), -1, np.int64), np.full((len(block), n), np.nan)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :take]
        indices[:, :take], out[:, :take] = order, np.take_along_axis(scores, order, axis=1)
        return Hits(indices, out)


register("cosine_bonus", RetrieverPlugin(CosineBonus, settings=BonusSettings, needs_query_vectors=True))
register("cosine_bonus", Method("cosine_bonus", "cosine plus a bonus for a year the question names",
                                retriever="cosine_bonus", stages=DENSE))  # fmt: skip
