"""The stage interface and the column helpers every stage uses.

A stage maps a pyarrow batch to a pyarrow batch: it reads the columns it documents, adds (or replaces) its own and
passes every other column through. It is built once per process from a `Resources` (which loads models and
indexes lazily, once) and called on batches of any size; engines only decide where and how often it is called.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.resources import Resources


class Stage:
    """One pipeline step: Arrow batch in, Arrow batch out."""

    #: The name methods use for this stage (see `t2rag.methods`).
    name: ClassVar[str]
    #: False when the stage holds nothing worth keeping between batches (engines may run it as a plain task).
    stateful: ClassVar[bool] = True

    def __init__(self, resources: Resources):
        self.resources = resources
        self.config = resources.config

    def __call__(self, batch: pa.Table) -> pa.Table:
        raise NotImplementedError

    @classmethod
    def candidates(cls, config: RunConfig, k: int) -> int | None:
        """How many ranked results this stage needs from retrieval (None: no demand beyond the usual depth)."""
        return None


def groups(batch: pa.Table, *keys: str) -> Iterator[tuple[tuple, np.ndarray]]:
    """Row positions of each distinct key combination, in order of first appearance (one step per group)."""
    if batch.num_rows == 0:
        return
    first = tuple(batch.column(k)[0].as_py() for k in keys)
    if all(_all_equal(batch.column(k), value) for k, value in zip(keys, first, strict=True)):
        yield first, np.arange(batch.num_rows, dtype=np.int64)  # one group (a served batch, mostly): no group_by
        return
    grouped = batch.select(list(keys)).append_column("_row", pa.array(np.arange(batch.num_rows))).group_by(list(keys))
    rows = grouped.aggregate([("_row", "list")]).to_pylist()
    rows.sort(key=lambda r: r["_row_list"][0])
    for row in rows:
        yield tuple(row[k] for k in keys), np.asarray(row["_row_list"], dtype=np.int64)


def _all_equal(column: pa.ChunkedArray, value: object) -> bool:
    if value is None:
        return column.null_count == len(column)
    return bool(pc.all(pc.equal(column, pa.scalar(value, column.type))).as_py()) and column.null_count == 0


def set_rows(column: list, rows: np.ndarray, values: list) -> None:
    for i, value in zip(rows.tolist(), values, strict=True):
        column[i] = value


def with_columns(batch: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """The batch with these columns added, or replaced where they exist."""
    for name, values in columns.items():
        if name in batch.column_names:
            batch = batch.set_column(batch.schema.get_field_index(name), name, values)
        else:
            batch = batch.append_column(name, values)
    return batch


def column(batch: pa.Table, name: str, default: object = None) -> list:
    """A column as a list; `default` for every row when the batch has no such column."""
    if name in batch.column_names:
        return batch.column(name).to_pylist()
    return [default] * batch.num_rows


def row_k(batch: pa.Table, default: int) -> list[int]:
    """Contexts per question: the optional `k` column (served requests), else the run's k."""
    return [default if k is None else int(k) for k in column(batch, "k")]
