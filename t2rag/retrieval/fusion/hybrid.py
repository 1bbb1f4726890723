"""Hybrid retrievers: the paper's Hybrid BM25 (default) and reciprocal-rank fusion."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import DensePassages, Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.fusion.rank_fusion import paper_hybrid, rrf
from t2rag.retrieval.lexical.bm25 import BM25Retriever


class _DenseAndBM25(IndexedMixin, Retriever):
    """A dense and a BM25 retriever indexed on the same corpus; subclasses fuse their results."""

    needs_query_vectors = True
    dense: DenseRetriever
    bm25: BM25Retriever

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self._corpus = corpus
        self.dense.index(corpus, vectors)
        self.bm25.index(corpus)

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        return self.dense.dense_passages(corpus)


class HybridBM25Retriever(_DenseAndBM25):
    """The paper's fusion of the dense top-k with max-normalised BM25 scores (alpha = beta = 0.5)."""

    name = "hybrid_bm25"

    def __init__(self, dense: DenseRetriever, bm25: BM25Retriever, alpha: float = 0.5, beta: float = 0.5):
        if abs(alpha + beta - 1.0) > 1e-9 or min(alpha, beta) < 0:
            raise ValueError(f"hybrid weights must be non-negative and sum to 1 (got alpha={alpha}, beta={beta})")
        self.dense, self.bm25, self.alpha, self.beta = dense, bm25, alpha, beta

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block = as_block(queries)
        dense = self.dense.search(block, k, depth=k)
        return paper_hybrid(dense, self.bm25.scores(block.texts), k, result_depth(k, depth), self.alpha, self.beta)


class HybridRRFRetriever(_DenseAndBM25):
    """Reciprocal-rank fusion (k = 60) of the dense and BM25 rankings, each cut at `candidates`."""

    name = "hybrid_rrf"

    def __init__(self, dense: DenseRetriever, bm25: BM25Retriever, k_rrf: int = 60, candidates: int = 50):
        self.dense, self.bm25, self.k_rrf, self.candidates = dense, bm25, k_rrf, candidates

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block = as_block(queries)
        n = max(self.candidates, result_depth(k, depth))
        rankings = [self.dense.search(block, k, depth=n), self.bm25.search(block, k, depth=n)]
        return rrf(rankings, len(self.corpus), result_depth(k, depth), self.k_rrf)
