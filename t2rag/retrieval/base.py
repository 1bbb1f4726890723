"""The retriever interface: index a corpus once, then search a whole block of queries at a time."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from t2rag.data.corpus import Corpus

#: Every retriever returns at least this many results, so MRR@k and Recall@k can be reported up to k = 10.
MIN_DEPTH = 10


def result_depth(k: int, depth: int | None = None) -> int:
    """How many results a search returns: the requested depth, else max(k, MIN_DEPTH)."""
    return depth if depth is not None else max(k, MIN_DEPTH)


@dataclass(frozen=True)
class Hits:
    """Ranked results for a block of queries: corpus positions (-1 pads short rows) and scores (NaN: none)."""

    indices: np.ndarray  # (queries, n) int64
    scores: np.ndarray  # (queries, n) float64

    def __len__(self) -> int:
        return len(self.indices)

    def context_ids(self, corpus: Corpus) -> list[list[str]]:
        ids = np.asarray(corpus.context_ids, dtype=object)
        return [ids[row[row >= 0]].tolist() for row in self.indices]

    def score_lists(self) -> list[list[float]]:
        return [s[i >= 0].tolist() for s, i in zip(self.scores, self.indices, strict=True)]

    def head(self, n: int) -> Hits:
        """The first n results of every query."""
        return Hits(self.indices[:, :n], self.scores[:, :n])


@dataclass
class QueryBlock:
    """Queries of one block; `vectors` holds dense query embeddings computed elsewhere (e.g. a GPU actor pool)."""

    texts: list[str]
    vectors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def slice(self, start: int, stop: int) -> QueryBlock:
        return QueryBlock(self.texts[start:stop], None if self.vectors is None else self.vectors[start:stop])


@dataclass(frozen=True)
class DensePassages:
    """A vector table a dense retriever reads: its name, the passages to embed and the document each stands for
    (None: itself; a chunk names its context)."""

    table: str
    passages: Corpus
    docs: np.ndarray | None = None


def as_block(queries: Sequence[str] | QueryBlock) -> QueryBlock:
    return queries if isinstance(queries, QueryBlock) else QueryBlock(list(queries))


class Retriever(ABC):
    """Index once per corpus with `index`, then `search` blocks of queries."""

    name: str = "retriever"
    needs_query_vectors: bool = False

    @abstractmethod
    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        """Build (or load from cache) the index for a corpus; `vectors` are precomputed passage embeddings."""

    @abstractmethod
    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        """Rank the corpus for every query; returns `result_depth(k, depth)` results per query."""

    def index_shard(self, corpus: Corpus, shard: range, vectors: np.ndarray | None = None, context=None):
        """Index only the documents `shard` of the corpus (positions in hits are then shard-local). `context` is
        what an earlier shard of the same corpus returned (corpus-wide state worth sharing); returns it."""
        if not self.shardable:
            raise ValueError(f"retriever '{self.name}' cannot be sharded (shardable: bm25, base)")
        self.index(shard_corpus(corpus, shard), None if vectors is None else vectors[shard.start : shard.stop])
        return context

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        """The vector tables this retriever reads for a corpus, so an index build (Ray) can embed them first."""
        return []

    #: Whether a shard scores its documents as the whole index would (see t2rag.retrieval.shards).
    shardable: bool = False

    @property
    @abstractmethod
    def corpus(self) -> Corpus:
        """The indexed corpus."""


def shard_corpus(corpus: Corpus, shard: range) -> Corpus:
    """The documents `shard` of a corpus, named after it."""
    return corpus.select(list(shard), f"{corpus.name}[{shard.start}:{shard.stop}]")


class IndexedMixin:
    _corpus: Corpus | None = None

    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            raise RuntimeError(f"{type(self).__name__}: call index(corpus) before search")
        return self._corpus
