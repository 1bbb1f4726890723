"""Rank fusion of dense and BM25 results, vectorised over a block of queries.

`paper_hybrid` is the T2-RAGBench authors' Hybrid BM25: the dense top-k list D gives each of its contexts
1 - pos/|D| (pos 0-based) and every other context 0; BM25 scores are divided by the query's maximum; the fused
score is alpha * dense + beta * bm25. Candidates are D plus every context with a positive BM25 score; ties are
broken by dense rank, then by BM25 score, then by corpus order. `rrf` is reciprocal-rank fusion: the sum of
1 / (k_rrf + rank) over the input rankings (rank 1-based), as LanceDB's RRFReranker computes it.
"""

from __future__ import annotations

import numpy as np

from t2rag.retrieval.base import Hits
from t2rag.retrieval.ranking import top_n


def _positions(hits: Hits, n_docs: int) -> np.ndarray:
    """(queries x documents) 0-based position of each document in `hits`, +inf where absent."""
    pos = np.full((len(hits), n_docs), np.inf)
    rows, cols = np.nonzero(hits.indices >= 0)
    pos[rows, hits.indices[rows, cols]] = cols
    return pos


def paper_hybrid(
    dense: Hits, bm25_scores: np.ndarray, k: int, depth: int, alpha: float = 0.5, beta: float = 0.5
) -> Hits:
    """Fuse the dense top-k with normalised BM25 scores of all documents (the paper's Hybrid BM25)."""
    top_k = dense.head(k)
    n_docs = bm25_scores.shape[1]
    pos = _positions(top_k, n_docs)
    size = (top_k.indices >= 0).sum(axis=1, keepdims=True).astype(np.float64)  # |D| per query
    in_d = np.isfinite(pos)
    dense_part = np.where(in_d, 1.0 - np.where(in_d, pos, 0.0) / np.maximum(size, 1.0), 0.0)
    row_max = bm25_scores.max(axis=1, keepdims=True) if n_docs else np.zeros((len(bm25_scores), 1))
    positive = bm25_scores > 0
    bm25_part = np.where(positive & (row_max > 0), bm25_scores / np.where(row_max > 0, row_max, 1.0), 0.0)
    fused = alpha * dense_part + beta * bm25_part
    indices, scores = top_n(fused, depth, -pos, bm25_scores, valid=in_d | positive)
    return Hits(indices, scores)


def rrf(rankings: list[Hits], n_docs: int, depth: int, k_rrf: int = 60) -> Hits:
    """Reciprocal-rank fusion of several rankings of the same queries; ties by the first ranking's order."""
    fused = np.zeros((len(rankings[0]), n_docs))
    positions = []
    for hits in rankings:
        pos = _positions(hits, n_docs)
        fused += np.where(np.isfinite(pos), 1.0 / (k_rrf + np.where(np.isfinite(pos), pos, 0.0) + 1.0), 0.0)
        positions.append(-pos)
    indices, scores = top_n(fused, depth, *positions, valid=fused > 0)
    return Hits(indices, scores)
