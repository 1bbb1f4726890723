"""Dense vectors of a corpus in LanceDB (a local directory or an `s3://` URI), searched in blocks.

One table per (corpus fingerprint, embedder cache key): building is skipped when the table already holds the
corpus. Search is exact (a flat scan) unless an ANN index was requested, so results are reproducible.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from t2rag.data.corpus import Corpus
from t2rag.storage import is_s3, lancedb_storage_options

log = logging.getLogger(__name__)

os.environ.setdefault("LANCE_LOG", "error")  # LanceDB's scanner warns per query otherwise


def default_index_uri() -> str:
    return os.environ.get("T2RAG_INDEX_URI") or str(
        Path(os.environ.get("T2RAG_CACHE", "~/.cache/t2rag")).expanduser() / "lancedb"
    )


def table_name(corpus: Corpus, embedder_key: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in corpus.name)
    return f"{safe}-{corpus.fingerprint}-{embedder_key}"


class VectorStore:
    """A LanceDB database holding one table per indexed corpus."""

    def __init__(self, uri: str | None = None):
        import lancedb

        self.uri = uri or default_index_uri()
        if not is_s3(self.uri):
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        self.db = lancedb.connect(self.uri, storage_options=lancedb_storage_options(self.uri))

    def has_table(self, name: str, rows: int) -> bool:
        if name not in self._tables():
            return False
        return self.db.open_table(name).count_rows() == rows

    def _tables(self) -> list[str]:
        result = self.db.list_tables()
        return list(getattr(result, "tables", result))

    def get_or_build(self, name: str, corpus: Corpus, embed: Callable[[list[str]], np.ndarray]) -> DenseTable:
        """Open the corpus table, embedding and writing it first when it is missing or incomplete."""
        if self.has_table(name, len(corpus)):
            log.info("reusing index %s/%s", self.uri, name)
            return DenseTable(self.db.open_table(name))
        start = time.perf_counter()
        vectors = embed(list(corpus.texts))
        log.info("embedded %d passages in %.1fs", len(corpus), time.perf_counter() - start)
        return self.write(name, corpus, vectors)

    def write(self, name: str, corpus: Corpus, vectors: np.ndarray) -> DenseTable:
        """Create (or replace) the table for a corpus from precomputed vectors."""
        table = corpus_vectors_table(corpus, vectors)
        return DenseTable(self.db.create_table(name, data=table, mode="overwrite"))

    def open(self, name: str) -> DenseTable:
        return DenseTable(self.db.open_table(name))


def corpus_vectors_table(corpus: Corpus, vectors: np.ndarray) -> pa.Table:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.shape[0] != len(corpus):
        raise ValueError(f"{vectors.shape[0]} vectors for {len(corpus)} passages")
    flat = pa.array(vectors.reshape(-1))
    return pa.table(
        {
            "doc": pa.array(np.arange(len(corpus), dtype=np.int64)),
            "context_id": list(corpus.context_ids),
            "subset": list(corpus.subsets),
            "text": list(corpus.texts),
            "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
        }
    )


class DenseTable:
    """Cosine search over one LanceDB table for a block of query vectors at once."""

    def __init__(self, table):
        self.table = table

    def search(self, vectors: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Corpus positions and cosine similarities of the n nearest passages per query (exact scan)."""
        q = len(vectors)
        indices = np.full((q, n), -1, dtype=np.int64)
        scores = np.full((q, n), np.nan)
        if q == 0 or n == 0:
            return indices, scores
        query = self.table.search(list(np.asarray(vectors, dtype=np.float32))).metric("cosine").limit(n)
        result = query.select(["doc", "_distance"]).to_arrow()
        if "query_index" in result.column_names:
            qi = result.column("query_index").to_numpy().astype(np.int64)
        else:  # a single query comes back without query_index
            qi = np.zeros(result.num_rows, dtype=np.int64)
        doc = result.column("doc").to_numpy()
        sim = 1.0 - result.column("_distance").to_numpy().astype(np.float64)
        # LanceDB returns each query's rows in ascending distance; number them within their query.
        order = np.lexsort((-sim, qi))
        qi, doc, sim = qi[order], doc[order], sim[order]
        starts = np.searchsorted(qi, np.arange(q))
        pos = np.arange(len(qi)) - starts[qi]
        keep = pos < n
        indices[qi[keep], pos[keep]] = doc[keep]
        scores[qi[keep], pos[keep]] = sim[keep]
        return indices, scores
