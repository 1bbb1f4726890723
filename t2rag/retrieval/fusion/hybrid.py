"""The paper's Hybrid BM25 (`hybrid_rrf`, reciprocal-rank fusion, is `t2rag.retrieval.fusion.reciprocal`'s)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import DensePassages, Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.fusion.rank_fusion import paper_hybrid
from t2rag.retrieval.lexical.bm25 import BM25Retriever


class HybridBM25Retriever(IndexedMixin, Retriever):
    """The paper's fusion of the dense top-k with max-normalised BM25 scores (alpha = beta = 0.5), both indexed on the
    same corpus."""

    name = "hybrid_bm25"
    needs_query_vectors = True

    def __init__(self, dense: DenseRetriever, bm25: BM25Retriever, alpha: float = 0.5, beta: float = 0.5):
        if abs(alpha + beta - 1.0) > 1e-9 or min(alpha, beta) < 0:
            raise ValueError(f"hybrid weights must be non-negative and sum to 1 (got alpha={alpha}, beta={beta})")
        self.dense, self.bm25, self.alpha, self.beta = dense, bm25, alpha, beta

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self._corpus = corpus
        self.dense.index(corpus, vectors)
        self.bm25.index(corpus)

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        return self.dense.dense_passages(corpus)

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block = as_block(queries)
        dense = self.dense.search(block, k, depth=k)
        return paper_hybrid(dense, self.bm25.scores(block.texts), k, result_depth(k, depth), self.alpha, self.beta)
