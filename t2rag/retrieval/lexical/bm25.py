"""The BM25 retriever over `BM25Matrix`, with an in-process cache keyed by corpus fingerprint and settings."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth, shard_corpus
from t2rag.retrieval.lexical.bm25_matrix import BM25Matrix, BM25Params, BM25Statistics
from t2rag.tokenize import get_tokenizer


#: Matrices kept for reuse by later retrievers of the same corpus (bm25 and the hybrids, one per subset): a few,
#: since a matrix of a million documents takes gigabytes.
@lru_cache(maxsize=4)
def _cached_matrix(fingerprint: str, texts: tuple[str, ...], tokenizer: str, params: BM25Params) -> BM25Matrix:
    return BM25Matrix(texts, get_tokenizer(tokenizer), params)


class BM25Retriever(IndexedMixin, Retriever):
    """Okapi BM25 with rank_bm25's defaults and the paper's lowercase-whitespace tokenization."""

    name = "bm25"
    shardable = True

    def __init__(self, tokenizer: str = "whitespace", k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        get_tokenizer(tokenizer)  # fail early on a bad name
        self.tokenizer = tokenizer
        self.params = BM25Params(k1, b, epsilon)
        self.matrix: BM25Matrix | None = None

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self._corpus = corpus
        self.matrix = _cached_matrix(corpus.fingerprint, corpus.texts, self.tokenizer, self.params)

    def index_shard(self, corpus: Corpus, shard: range, vectors: np.ndarray | None = None, context=None):
        """A shard's weights with the whole corpus's statistics (the context shared between shards)."""
        statistics = context or self.statistics(corpus)
        self.index_part(shard_corpus(corpus, shard), statistics)
        return statistics

    def statistics(self, corpus: Corpus) -> BM25Statistics:
        """What a shard of `corpus` needs of it (`index_part`); those of consecutive pieces merge."""
        return BM25Statistics.of(corpus.texts, get_tokenizer(self.tokenizer))

    def index_part(self, part: Corpus, statistics: BM25Statistics) -> None:
        """Index a shard's documents alone, scored with the whole corpus's statistics (positions shard-local)."""
        self._corpus = part
        self.matrix = BM25Matrix(part.texts, get_tokenizer(self.tokenizer), self.params, statistics)

    def scores(self, queries: Sequence[str], left_out: Sequence[frozenset[str]] | None = None) -> np.ndarray:
        """Dense (queries x documents) BM25 scores, each query without the terms `left_out` of it (one set per
        query)."""
        if self.matrix is None:
            raise RuntimeError("BM25Retriever: call index(corpus) before search")
        return self.matrix.scores(list(queries), left_out)

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        if self.matrix is None:
            raise RuntimeError("BM25Retriever: call index(corpus) before search")
        return Hits(*self.matrix.top_k(as_block(queries).texts, result_depth(k, depth)))
