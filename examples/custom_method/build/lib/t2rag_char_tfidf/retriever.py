"""TF-IDF over character n-grams: one sparse matrix of the corpus, cosine scores for a block of questions at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sklearn.feature_extraction.text import TfidfVectorizer

from t2rag.extend import Corpus, Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth


class CharTfidfSettings(BaseModel):
    """The `settings: {char_tfidf: {...}}` block of a run config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    analyzer: Literal["char", "char_wb"] = "char_wb"  # char_wb: n-grams inside word boundaries
    ngram_min: int = Field(3, ge=1)
    ngram_max: int = Field(5, ge=1)
    sublinear_tf: bool = True
    max_features: int | None = Field(None, ge=1)  # None: every n-gram of the corpus
    lowercase: bool = True

    @model_validator(mode="after")
    def _range(self) -> CharTfidfSettings:
        if self.ngram_min > self.ngram_max:
            raise ValueError(f"ngram_min {self.ngram_min} is above ngram_max {self.ngram_max}")
        return self


class CharTfidfRetriever(IndexedMixin, Retriever):
    """Index: fit the vectorizer on the corpus's texts. Search: l2-normalised query vectors times the corpus's."""

    name = "char_tfidf"

    def __init__(self, settings: CharTfidfSettings | None = None):
        self.settings = settings or CharTfidfSettings()

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        s = self.settings
        self.vectorizer = TfidfVectorizer(
            analyzer=s.analyzer,
            ngram_range=(s.ngram_min, s.ngram_max),
            sublinear_tf=s.sublinear_tf,
            max_features=s.max_features,
            lowercase=s.lowercase,
            dtype=np.float32,
        )
        self.matrix = self.vectorizer.fit_transform(list(corpus.texts)).T.tocsr()  # n-grams x contexts
        self._corpus = corpus

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block = as_block(queries)
        n = result_depth(k, depth)
        n_docs = len(self.corpus)
        scores = (self.vectorizer.transform(block.texts) @ self.matrix).toarray().astype(np.float64)
        indices = np.full((len(block), n), -1, dtype=np.int64)
        out = np.full((len(block), n), np.nan)
        take = min(n, n_docs)
        if take:
            # Best first; ties by corpus position (a stable sort of the negated scores).
            order = np.argsort(-scores, axis=1, kind="stable")[:, :take]
            indices[:, :take] = order
            out[:, :take] = np.take_along_axis(scores, order, axis=1)
        return Hits(indices, out)
