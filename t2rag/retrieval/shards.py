"""Sharded retrieval: a corpus split into consecutive document ranges, each searched on its own, the per-shard top
lists merged exactly.

A shard returns its best n with corpus-wide positions; the merge orders all of them by score (descending) and then
by position, which is the unsharded tie order, and keeps n. That is exact whenever a shard scores a document as the
unsharded index would: true for flat dense search, and for BM25 because every shard is built with the whole
corpus's statistics (`BM25Statistics`). Shards may live in one process (`ShardedRetriever`) or in several retrieval
actors, each holding one (`ray_jobs.placement`), where each shard merges its hits into those of the shards before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth


def shard_ranges(n_docs: int, shards: int) -> list[range]:
    """`shards` consecutive document ranges of near-equal size (none empty unless the corpus is smaller)."""
    edges = np.linspace(0, n_docs, min(shards, max(n_docs, 1)) + 1).round().astype(int)
    return [range(a, b) for a, b in pairwise(edges.tolist())]


def merge_hits(parts: Sequence[Hits], n: int) -> Hits:
    """The n best of several top lists over disjoint documents (positions corpus-wide): score descending, then
    position, as one unsharded search ranks them. Rows of every part are the same queries."""
    index = np.concatenate([p.indices for p in parts], axis=1)
    score = np.concatenate([p.scores for p in parts], axis=1)
    missing = index < 0
    # Empty places go last: their key is +inf after negation, then the largest position.
    key = np.where(missing, np.inf, -score)
    position = np.where(missing, np.iinfo(np.int64).max, index)
    order = np.lexsort((position, key), axis=1)[:, :n]
    index, score = np.take_along_axis(index, order, axis=1), np.take_along_axis(score, order, axis=1)
    if index.shape[1] < n:
        pad = ((0, 0), (0, n - index.shape[1]))
        index, score = np.pad(index, pad, constant_values=-1), np.pad(score, pad, constant_values=np.nan)
    return Hits(index, score)


def offset_hits(hits: Hits, first: int) -> Hits:
    """A shard's hits with corpus-wide positions."""
    return Hits(np.where(hits.indices >= 0, hits.indices + first, -1), hits.scores)


class ShardedRetriever(IndexedMixin, Retriever):
    """One retriever per shard of the corpus, searched one after another in this process, merged exactly."""

    def __init__(self, make: Callable[[], Retriever], shards: int):
        self.make, self.shards = make, shards
        self.parts: list[tuple[range, Retriever]] = []
        probe = make()
        self.name, self.needs_query_vectors = probe.name, probe.needs_query_vectors

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self._corpus = corpus
        self.parts = []
        context = None
        for shard in shard_ranges(len(corpus), self.shards):
            retriever = self.make()
            context = retriever.index_shard(corpus, shard, vectors, context)
            self.parts.append((shard, retriever))

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block, n = as_block(queries), result_depth(k, depth)
        return merge_hits([offset_hits(r.search(block, k, n), shard.start) for shard, r in self.parts], n)
