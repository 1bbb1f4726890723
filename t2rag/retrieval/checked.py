"""A plugin's retriever behind a check of every block it returns: the shape `Retriever.search` promises, corpus
positions inside the corpus, and no NaN score beside a position. A block that fails ends the run with one line
naming the plugin, before its records are written."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.errors import PluginError
from t2rag.retrieval.base import DensePassages, Hits, QueryBlock, Retriever, as_block, result_depth


class CheckedRetriever(Retriever):
    """`inner` (a plugin's retriever, registered as `name` by `origin`) with its results checked."""

    def __init__(self, inner: Retriever, name: str, origin: str):
        if not isinstance(inner, Retriever):
            raise PluginError(f"plugin {origin}: retriever '{name}' built a {type(inner).__name__}, not a "
                              "t2rag.extend.Retriever")  # fmt: skip
        self.inner, self.name, self.origin = inner, name, origin
        self.needs_query_vectors = inner.needs_query_vectors

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self.inner.index(corpus, vectors)

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        return self.inner.dense_passages(corpus)

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
