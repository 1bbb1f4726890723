"""Dense vectors of a corpus in LanceDB (a local directory or an `s3://` URI), searched in blocks.

One table per (corpus fingerprint, embedder cache key): building is skipped when the table already holds the
corpus. Search is exact (a flat scan) by default, so results are reproducible; a corpus above `AnnConfig.above`
documents gets an ANN index instead, and its recall@10 against the flat scan is measured when it is built (on
probe queries made from the corpus's own vectors) and reported with the index.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from t2rag.data.corpus import Corpus
from t2rag.storage import is_s3, lancedb_storage_options, local_lock

log = logging.getLogger(__name__)

os.environ.setdefault("LANCE_LOG", "error")  # LanceDB's scanner warns per query otherwise


class AnnConfig(BaseModel):
    """When dense search stops being a flat scan, and how the ANN index is built and searched."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    above: int | None = Field(None, ge=1)  # documents above which a corpus gets an ANN index; None: always flat
    index_type: str = "IVF_PQ"  # a LanceDB vector index type
    nprobes: int = Field(32, ge=1)  # IVF partitions searched per query
    #: Re-rank refine_factor x k candidates with full vectors (the quantisation, not the probes, limits recall
    #: without it; the measurement behind 50 is in docs/performance.md).
    refine_factor: int | None = Field(50, ge=1)
    probes: int = Field(200, ge=10)  # queries that measure recall@10 against the flat scan when it is built

    def wanted(self, rows: int) -> bool:
        return self.above is not None and rows > self.above


def default_index_uri() -> str:
    return os.environ.get("T2RAG_INDEX_URI") or str(
        Path(os.environ.get("T2RAG_CACHE", "~/.cache/t2rag")).expanduser() / "lancedb"
    )


def table_name(corpus: Corpus, embedder_key: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in corpus.name)
    return f"{safe}-{corpus.fingerprint}-{embedder_key}"


class VectorStore:
    """A LanceDB database holding one table per indexed corpus."""

    def __init__(self, uri: str | None = None, ann: AnnConfig | None = None):
        import lancedb

        self.ann = ann or AnnConfig()
        self.uri = uri or default_index_uri()
        if not is_s3(self.uri):
            Path(self.uri).mkdir(parents=True, exist_ok=True)
        self.db = lancedb.connect(self.uri, storage_options=lancedb_storage_options(self.uri))

    def exists(self, name: str) -> bool:
        return name in self._tables()

    def has_table(self, name: str, rows: int) -> bool:
        if not self.exists(name):
            return False
        return self.db.open_table(name).count_rows() == rows

    def _tables(self) -> list[str]:
        result = self.db.list_tables()
        return list(getattr(result, "tables", result))

    def get_or_build(
        self, name: str, corpus: Corpus, embed: Callable[[list[str]], np.ndarray], docs: np.ndarray | None = None
    ) -> DenseTable:
        """Open the corpus table, embedding and writing it first when it is missing or incomplete."""
        with self._building(name):
            if self.has_table(name, len(corpus)):
                log.info("reusing index %s/%s", self.uri, name)
                return self.open(name)
            start = time.perf_counter()
            vectors = embed(list(corpus.texts))
            log.info("embedded %d passages in %.1fs", len(corpus), time.perf_counter() - start)
            return self.write(name, corpus, vectors, docs)

    def _building(self, name: str) -> AbstractContextManager:
        """In a local database, one process at a time looks for a table and builds it: processes that share a cache
        (two runs on one machine, or parallel test workers) embed a corpus once, the later ones waiting to reuse
        it. On S3 there is no lock: two builders at once both embed, and the table is the last one written."""
        return nullcontext() if is_s3(self.uri) else local_lock(Path(self.uri) / f".{name}.lock")

    def write(self, name: str, corpus: Corpus, vectors: np.ndarray, docs: np.ndarray | None = None) -> DenseTable:
        """Create (or replace) the table for a corpus from precomputed vectors; `docs` is the document position
        each row stands for (default: its own; chunks name the context they come from)."""
        table = corpus_vectors_table(corpus, vectors, docs)
        self.db.create_table(name, data=table, mode="overwrite")
        return self.open(name)

    def open(self, name: str) -> DenseTable:
        """The table, with an ANN index built first when the config wants one and the table has none."""
        table = DenseTable(self.db.open_table(name), self.ann)
        if self.ann.wanted(table.rows) and not table.has_ann_index:
            table.build_ann_index()
        return table


def corpus_vectors_table(corpus: Corpus, vectors: np.ndarray, docs: np.ndarray | None = None) -> pa.Table:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.shape[0] != len(corpus):
        raise ValueError(f"{vectors.shape[0]} vectors for {len(corpus)} passages")
    flat = pa.array(vectors.reshape(-1))
    return pa.table(
        {
            "doc": pa.array(np.arange(len(corpus), dtype=np.int64) if docs is None else np.asarray(docs, np.int64)),
            "context_id": list(corpus.context_ids),
            "subset": list(corpus.subsets),
            "text": list(corpus.texts),
            "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1]),
        }
    )


class DenseTable:
    """Cosine search over one LanceDB table for a block of query vectors at once: a flat scan, or the ANN index
    when the config wants one for a table this size (`ann_info` then holds its build time and measured recall)."""

    def __init__(self, table, ann: AnnConfig | None = None):
        self.table = table
        self.ann = ann or AnnConfig()
        self.rows = table.count_rows()
        self.ann_info: dict | None = None
        # Read once: searching asks on every block, and listing a table's indexes is a storage round trip (S3).
        self.has_ann_index = any("vector" in getattr(i, "columns", []) for i in table.list_indices())
        self.uses_ann = self.ann.wanted(self.rows) and self.has_ann_index

    @property
    def search_info(self) -> dict:
        """How this table is searched: flat, or ANN with its measured recall (when built in this process)."""
        return {"search": "ann", **(self.ann_info or {})} if self.uses_ann else {"search": "flat"}

    def build_ann_index(self) -> dict:
        """Build the ANN index and measure its recall@10 against the flat scan."""
        dim = self.table.schema.field("vector").type.list_size
        start = time.perf_counter()
        self.table.create_index(
            metric="cosine",
            index_type=self.ann.index_type,
            num_partitions=max(1, int(np.sqrt(self.rows))),
            num_sub_vectors=next(d for d in (dim // 8, dim // 4, dim // 2, dim) if d and dim % d == 0),
            vector_column_name="vector",
            replace=True,
        )
        seconds = time.perf_counter() - start
        self.has_ann_index = True
        self.uses_ann = self.ann.wanted(self.rows)
        self.ann_info = {
            "ann_index": self.ann.index_type,
            "ann_build_s": round(seconds, 1),
            "ann_recall_at_10": round(self.recall_at_10(), 4),
            "ann_probe_queries": self.ann.probes,
        }
        log.info("ANN index on %d rows in %.1fs: recall@10 %.4f", self.rows, seconds, self.ann_info["ann_recall_at_10"])
        return self.ann_info

    def recall_at_10(self) -> float:
        """Share of the flat scan's top 10 the ANN search finds, for probe queries that are the normalised means
        of two random stored vectors (seeded): near the data, but never a stored vector itself."""
        rng = np.random.default_rng(0)
        wanted = sorted(set(rng.integers(0, self.rows, size=2 * self.ann.probes).tolist()))
        stored = (
            (self.table.search().where(f"doc IN ({', '.join(map(str, wanted))})").select(["vector"]))
            .limit(2 * self.ann.probes)
            .to_arrow()
        )  # rows of those documents (a chunk table holds several per document, or none of a high position)
        vectors = np.asarray(stored.column("vector").combine_chunks().flatten(), np.float32).reshape(
            stored.num_rows, -1
        )
        pairs = rng.integers(0, len(vectors), size=(self.ann.probes, 2))
        probes = vectors[pairs[:, 0]] + vectors[pairs[:, 1]]
        probes /= np.maximum(np.linalg.norm(probes, axis=1, keepdims=True), 1e-12)
        approximate, _ = self.search(probes, 10)
        exact, _ = self.search(probes, 10, flat=True)
        found = [
            len(set(a.tolist()) & set(e[e >= 0].tolist())) / max(int((e >= 0).sum()), 1)
            for a, e in zip(approximate, exact, strict=True)
        ]
        return float(np.mean(found))

    def vectors(self) -> np.ndarray:
        """Every stored vector, in document order (a table of one row per document: a context table)."""
        stored = self.table.to_arrow().select(["doc", "vector"])
        order = np.argsort(stored.column("doc").to_numpy(), kind="stable")
        flat = np.asarray(stored.column("vector").combine_chunks().flatten(), np.float32)
        return flat.reshape(stored.num_rows, -1)[order]

    def search(self, vectors: np.ndarray, n: int, flat: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Corpus positions and cosine similarities of the n nearest passages per query: an exact scan, unless
        the table uses its ANN index (and `flat` is not set)."""
        q = len(vectors)
        indices = np.full((q, n), -1, dtype=np.int64)
        scores = np.full((q, n), np.nan)
        if q == 0 or n == 0:
            return indices, scores
        query = self.table.search(list(np.asarray(vectors, dtype=np.float32))).metric("cosine").limit(n)
        if flat or not self.uses_ann:
            query = query.bypass_vector_index()
        else:
            query = query.nprobes(self.ann.nprobes)
            if self.ann.refine_factor:
                query = query.refine_factor(self.ann.refine_factor)
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
