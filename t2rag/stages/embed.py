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


class EmbedQueries(Stage):
    """`query_text` (default: `question`) -> `query_vector`.

    Rows with `query_as_passage` true (a generated HyDE document) are embedded as passages, the others with the
    embedder's query template. Each distinct text is embedded once per batch, however many methods share it.
    """

    name = "embed_queries"

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = column(batch, "query_text") if "query_text" in batch.column_names else column(batch, "question")
        as_passage = [bool(p) for p in column(batch, "query_as_passage", False)]
        wanted: dict[tuple[str, bool], list[int]] = {}
        for i, key in enumerate(zip(texts, as_passage, strict=True)):
            wanted.setdefault(key, []).append(i)
        vectors: list = [None] * batch.num_rows
        embedder = self.resources.embedder
        for passage in (False, True):
            keys = [key for key in wanted if key[1] is passage]
            if not keys:
                continue
            embed = embedder.embed_passages if passage else embedder.embed_queries
            for key, vec in zip(keys, embed([text for text, _ in keys]), strict=True):
                for i in wanted[key]:
                    vectors[i] = vec
        return with_columns(batch, {"query_vector": pa.array(vectors, VECTOR_TYPE)})


class EmbedPassages(Stage):
    """`text` -> `vector`: passage embeddings for a dense index (the model loads once per process)."""

    name = "embed_passages"

    def __call__(self, batch: pa.Table) -> pa.Table:
        vectors = self.resources.embedder.embed_passages(batch.column("text").to_pylist())
        return with_columns(batch, {"vector": pa.array(list(np.asarray(vectors, np.float32)), VECTOR_TYPE)})
