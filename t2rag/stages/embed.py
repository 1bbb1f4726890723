"""Dense embedding stages: query vectors for retrieval, passage vectors for building an index."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from t2rag.stages.base import Stage, column, with_columns

VECTOR_TYPE = pa.list_(pa.float32())


def vectors_of(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A (rows x dim) float32 matrix from a column of equal-length vectors."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if len(column) == 0:
        return np.zeros((0, 0), dtype=np.float32)
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(len(column), -1)


def vector_column(matrix: np.ndarray) -> pa.ListArray:
    """A column of vectors from a (rows x dim) matrix, without a Python step per row."""
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    rows, dim = matrix.shape if matrix.ndim == 2 else (0, 0)
    offsets = pa.array(np.arange(0, (rows + 1) * dim, dim, dtype=np.int32) if rows else np.zeros(1, np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(matrix.reshape(-1)))


class EmbedQueries(Stage):
    """`query_text` (default: `question`) -> `query_vector`.

    Rows with `query_as_passage` true (a generated HyDE document) are embedded as passages, the others with the
    embedder's query template. Each distinct text is embedded once per batch, however many methods share it.
    """

    name = "embed_queries"

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = column(batch, "query_text") if "query_text" in batch.column_names else column(batch, "question")
        as_passage = [bool(p) for p in column(batch, "query_as_passage", False)]
        # Each distinct (text, kind) is embedded once; `slot` maps every row to its distinct key.
        distinct = dict.fromkeys(zip(texts, as_passage, strict=True))
        embedder = self.resources.embedder
        parts, order = [], []
        for passage in (False, True):
            keys = [key for key in distinct if key[1] is passage]
            if keys:
                embed = embedder.embed_passages if passage else embedder.embed_queries
                parts.append(np.asarray(embed([text for text, _ in keys]), dtype=np.float32))
                order += keys
        if not parts:
            return with_columns(batch, {"query_vector": pa.nulls(0, VECTOR_TYPE)})
        slot = {key: i for i, key in enumerate(order)}
        rows = np.fromiter((slot[key] for key in zip(texts, as_passage, strict=True)), np.int64, batch.num_rows)
        return with_columns(batch, {"query_vector": vector_column(np.concatenate(parts)[rows])})


class EmbedPassages(Stage):
    """`text` -> `vector`: passage embeddings for a dense index (the model loads once per process)."""

    name = "embed_passages"

    def __call__(self, batch: pa.Table) -> pa.Table:
        vectors = self.resources.embedder.embed_passages(batch.column("text").to_pylist())
        return with_columns(batch, {"vector": vector_column(vectors)})
