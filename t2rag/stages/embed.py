"""Dense embedding stages: query vectors for retrieval, passage vectors for building an index.

The embedding stages tokenize for themselves, unless an earlier tokenizing stage (run by Ray on CPU actors in front
of GPU embedding actors) left the ids in `query_token_ids` / `token_ids`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from t2rag.stages.base import Stage, column, with_columns

VECTOR_TYPE = pa.list_(pa.float32())
TOKEN_IDS_TYPE = pa.list_(pa.int32())


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


def _distinct_queries(batch: pa.Table) -> tuple[list[tuple[str, bool]], dict[tuple[str, bool], int]]:
    """Every row's (text, embedded as passage) key, and the row each distinct key is first seen in: a question
    shared by several methods is tokenized and embedded once."""
    texts = column(batch, "query_text") if "query_text" in batch.column_names else column(batch, "question")
    keys = list(zip(texts, (bool(p) for p in column(batch, "query_as_passage", False)), strict=True))
    first: dict[tuple[str, bool], int] = {}
    for row, key in enumerate(keys):
        first.setdefault(key, row)
    return keys, first


class TokenizeQueries(Stage):
    """`query_text` (default: `question`), `query_as_passage` -> `query_token_ids`: the ids `embed_queries` would
    make itself, query or passage template applied; each distinct text tokenized once per batch."""

    name = "tokenize_queries"
    reads = ("question",)
    optional = ("query_text", "query_as_passage")
    adds = pa.schema({"query_token_ids": TOKEN_IDS_TYPE})
    pool = "tokenize"

    def __call__(self, batch: pa.Table) -> pa.Table:
        keys, first = _distinct_queries(batch)
        tokenizer = self.resources.embed_tokenizer
        made: dict[tuple[str, bool], list[int]] = {}
        for passage in (False, True):
            distinct = [key for key in first if key[1] is passage]
            if distinct:
                tokenize = tokenizer.passages if passage else tokenizer.queries
                made.update(zip(distinct, tokenize([text for text, _ in distinct]), strict=True))
        return with_columns(batch, {"query_token_ids": pa.array([made[key] for key in keys], TOKEN_IDS_TYPE)})


class EmbedQueries(Stage):
    """`query_text` (default: `question`), `query_as_passage`, optional `query_token_ids` -> `query_vector`.

    Rows with `query_as_passage` true (a generated HyDE document) are embedded as passages, the others with the
    embedder's query template. Each distinct text is embedded once per batch, however many methods share it.
    """

    name = "embed_queries"
    reads = ("question",)
    optional = ("query_text", "query_as_passage", "query_token_ids")
    adds = pa.schema({"query_vector": VECTOR_TYPE})
    pool = "embed"

    def __call__(self, batch: pa.Table) -> pa.Table:
        keys, first = _distinct_queries(batch)
        ids = column(batch, "query_token_ids") if "query_token_ids" in batch.column_names else None
        embedder = self.resources.embedder
        parts, order = [], []
        for passage in (False, True):
            distinct = [key for key in first if key[1] is passage]
            if not distinct:
                continue
            if ids is not None:
                vectors = embedder.embed_token_ids([ids[first[key]] for key in distinct])
            else:
                embed = embedder.embed_passages if passage else embedder.embed_queries
                vectors = embed([text for text, _ in distinct])
            parts.append(np.asarray(vectors, dtype=np.float32))
            order += distinct
        if not parts:
            return with_columns(batch, {"query_vector": pa.nulls(0, VECTOR_TYPE)})
        slot = {key: i for i, key in enumerate(order)}
        rows = np.fromiter((slot[key] for key in keys), np.int64, batch.num_rows)
        return with_columns(batch, {"query_vector": vector_column(np.concatenate(parts)[rows])})


class TokenizePassages(Stage):
    """`text` -> `token_ids`: the ids `embed_passages` would make itself."""

    name = "tokenize_passages"
    reads = ("text",)
    adds = pa.schema({"token_ids": TOKEN_IDS_TYPE})
    pool = "tokenize"

    def __call__(self, batch: pa.Table) -> pa.Table:
        ids = self.resources.embed_tokenizer.passages(batch.column("text").to_pylist())
        return with_columns(batch, {"token_ids": pa.array(ids, TOKEN_IDS_TYPE)})


class EmbedPassages(Stage):
    """`text`, optional `token_ids` -> `vector`: passage embeddings for a dense index (the model loads once per
    process)."""

    name = "embed_passages"
    reads = ("text",)
    optional = ("token_ids",)
    adds = pa.schema({"vector": VECTOR_TYPE})
    pool = "embed"

    def __call__(self, batch: pa.Table) -> pa.Table:
        embedder = self.resources.embedder
        if "token_ids" in batch.column_names:
            vectors = embedder.embed_token_ids(batch.column("token_ids").to_pylist())
        else:
            vectors = embedder.embed_passages(batch.column("text").to_pylist())
        return with_columns(batch, {"vector": vector_column(vectors)})
