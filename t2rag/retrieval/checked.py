"""A plugin's retriever behind a check of every block it returns: the shape `Retriever.search` promises, corpus
positions inside the corpus, and no NaN score beside a position. A block that fails ends the run with one line
naming the plugin, before its records are written.

A dense plugin (`RetrieverPlugin(needs_query_vectors=True)`) is given what the built-in dense retrievers get: the
question's embedding on every block, and at `index` the passages embedded by the run's embedder, read from the
same cache (`PassageVectors`: the vector table the built-in `base` searches, which a Ray run fills in its embedding
pool before any retrieval actor starts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.errors import PluginError
from t2rag.retrieval.base import DensePassages, Hits, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.dense.embedder import EmbedderConfig, make_embedder
from t2rag.retrieval.dense.vector_store import AnnConfig, VectorStore, table_name


@dataclass(frozen=True)
class PassageVectors:
    """Where a dense plugin's passage vectors come from: the run's embedder and its vector cache."""

    embedder: EmbedderConfig
    index_uri: str | None = None
    ann: AnnConfig | None = None

    def table(self, corpus: Corpus) -> DensePassages:
        """The vector table of a corpus's passages (the one the built-in dense retriever reads)."""
        return DensePassages(table_name(corpus, self.embedder.cache_key), corpus)

    def of(self, corpus: Corpus) -> np.ndarray:
        """The corpus's passage vectors, in corpus order: read from the cache, embedded here only when missing."""
        plan = self.table(corpus)
        store = VectorStore(self.index_uri, self.ann)
        return store.get_or_build(plan.table, plan.passages, self._embed).vectors()

    def _embed(self, texts: list[str]) -> np.ndarray:
        return make_embedder(self.embedder).embed_passages(texts)  # the model loads only when the cache misses


class CheckedRetriever(Retriever):
    """`inner` (a plugin's retriever, registered as `name` by `origin`) with its results checked; a dense one
    (`passages` given) searches with the question's embedding and is indexed with the passages'."""

    def __init__(self, inner: Retriever, name: str, origin: str, passages: PassageVectors | None = None):
        if not isinstance(inner, Retriever):
            raise PluginError(f"plugin {origin}: retriever '{name}' built a {type(inner).__name__}, not a "
                              "t2rag.extend.Retriever")  # fmt: skip
        self.inner, self.name, self.origin, self.passages = inner, name, origin, passages
        self.needs_query_vectors = passages is not None or inner.needs_query_vectors

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        if vectors is None and self.passages is not None:
            vectors = self.passages.of(corpus)
        self.inner.index(corpus, vectors)

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        tables = self.inner.dense_passages(corpus)
        if self.passages is not None and not any(t.table == self.passages.table(corpus).table for t in tables):
            tables = [*tables, self.passages.table(corpus)]
        return tables

    @property
    def corpus(self) -> Corpus:
        return self.inner.corpus

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block = as_block(queries)
        hits = self.inner.search(block, k, depth=depth)
        problem = hits_problem(hits, len(block), result_depth(k, depth), len(self.inner.corpus))
        if problem:
            raise PluginError(f"plugin {self.origin}: retriever '{self.name}' returned {problem}")
        return hits


def hits_problem(hits: object, queries: int, depth: int, n_docs: int) -> str | None:
    """What is wrong with a retriever's answer to `queries` queries asked for `depth` results, or None."""
    if not isinstance(hits, Hits):
        return f"a {type(hits).__name__}, not Hits"
    indices, scores = np.asarray(hits.indices), np.asarray(hits.scores)
    want = (queries, depth)
    if indices.shape != want or scores.shape != want:
        return f"indices of shape {indices.shape} and scores of shape {scores.shape} for {queries} queries at depth {depth} (want {want} each)"  # noqa: E501
    if not np.issubdtype(indices.dtype, np.integer):
        return f"indices of type {indices.dtype}, not integers"
    outside = (indices < -1) | (indices >= n_docs)
    if outside.any():
        return f"position {int(indices[outside][0])}, outside the corpus of {n_docs} contexts (-1 pads a short row)"
    if np.isnan(np.asarray(scores, dtype=np.float64)[indices >= 0]).any():
        return "a NaN score for a ranked context"
    return None
