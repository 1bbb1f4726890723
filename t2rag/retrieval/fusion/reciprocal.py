"""Reciprocal-rank fusion of retrievers: `hybrid_rrf` (dense and BM25), and what a `rank_fusion:` entry of a run
config, or a plugin's `RankFusion`, builds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import DensePassages, Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.fusion.rank_fusion import rrf


class RankFusionRetriever(IndexedMixin, Retriever):
    """Each member ranks `max(candidates, depth)` contexts; the fused score is the sum of 1 / (k_rrf + rank)."""

    def __init__(self, name: str, members: Sequence[Retriever], k_rrf: int = 60, candidates: int = 50):
        if len(members) < 2:
            raise ValueError(f"rank fusion '{name}' needs two retrievers or more (got {len(members)})")
        self.name, self.members, self.k_rrf, self.candidates = name, list(members), k_rrf, candidates
        self.needs_query_vectors = any(m.needs_query_vectors for m in self.members)

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self._corpus = corpus
        for member in self.members:
            member.index(corpus, vectors if member.needs_query_vectors else None)

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        tables = [t for m in self.members for t in m.dense_passages(corpus)]
        return list({t.table: t for t in tables}.values())

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block = as_block(queries)
        n = max(self.candidates, result_depth(k, depth))
        rankings = [m.search(block, k, depth=n) for m in self.members]
        return rrf(rankings, len(self.corpus), result_depth(k, depth), self.k_rrf)
