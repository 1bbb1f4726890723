"""Dense retrieval: embed passages once into LanceDB, then cosine-search blocks of query vectors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import DensePassages, Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.dense.embedder import Embedder, EmbedderConfig, make_embedder
from t2rag.retrieval.dense.vector_store import AnnConfig, DenseTable, VectorStore, table_name


class DenseRetriever(IndexedMixin, Retriever):
    """Cosine similarity between normalised query and passage embeddings, stored and searched in LanceDB."""

    name = "base"
    needs_query_vectors = True
    shardable = True  # a flat scan scores a document the same in any table

    def __init__(
        self,
        embedder: EmbedderConfig | Embedder | None = None,
        index_uri: str | None = None,
        ann: AnnConfig | None = None,
    ):
        self._embedder = embedder if isinstance(embedder, Embedder) else None
        self.embedder_config = embedder.config if isinstance(embedder, Embedder) else (embedder or EmbedderConfig())
        self.index_uri = index_uri
        self.ann = ann
        self.table: DenseTable | None = None

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use, so a retriever fed precomputed vectors never loads the model."""
        if self._embedder is None:
            self._embedder = make_embedder(self.embedder_config)
        return self._embedder

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        return [DensePassages(table_name(corpus, self.embedder_config.cache_key), corpus)]

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        """Open or build the LanceDB table; `vectors` skips embedding when they were computed elsewhere."""
        self._corpus = corpus
        store = VectorStore(self.index_uri, self.ann)
        (plan,) = self.dense_passages(corpus)
        if vectors is not None:
            self.table = store.write(plan.table, plan.passages, vectors, plan.docs)
        else:
            self.table = store.get_or_build(plan.table, plan.passages, self._embed_passages, plan.docs)
        self.on_table(plan)

    def _embed_passages(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed_passages(texts)  # the model loads only when a table has to be built

    def on_table(self, plan: DensePassages) -> None:
        """Hook for subclasses: what to note about the opened table."""

    @property
    def index_info(self) -> dict:
        return self.table.search_info if self.table is not None else {}

    def query_vectors(self, block: QueryBlock) -> np.ndarray:
        return block.vectors if block.vectors is not None else self.embedder.embed_queries(block.texts)

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        block = as_block(queries)
        return self.search_vectors(self.query_vectors(block), result_depth(k, depth))

    def search_vectors(self, vectors: np.ndarray, n: int) -> Hits:
        if self.table is None:
            raise RuntimeError("DenseRetriever: call index(corpus) before search")
        return Hits(*self.table.search(vectors, n))
