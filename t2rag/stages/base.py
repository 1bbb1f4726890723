"""The stage interface and the column helpers every stage uses.

A stage maps a pyarrow batch to a pyarrow batch: it reads the columns it declares, adds (or replaces) the columns it
declares, with their Arrow types, and passes every other column through. It also declares the kind of pool it needs,
which is all Ray's placement knows of it. It is built once per process from a `Resources` (which loads models and
indexes lazily, once) and called on batches of any size; runners only decide where and how often it is called.
A new stage of t2rag is one subclass plus its place in `t2rag.stages.STAGES`; a plugin's stage is registered from
outside (`t2rag.extend`), with `after` naming its place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from t2rag import plugins
from t2rag.errors import PluginError
from t2rag.plugins import validated_settings
from t2rag.pools import PoolKind
from t2rag.prompts import Prompts
from t2rag.resources import Resources


class Stage:
    """One pipeline step: Arrow batch in, Arrow batch out."""

    #: The name methods use for this stage (see `t2rag.methods`).
    name: ClassVar[str]
    #: Columns the stage needs, and columns it reads when a row has them.
    reads: ClassVar[tuple[str, ...]] = ()
    optional: ClassVar[tuple[str, ...]] = ()
    #: Columns the stage adds or replaces, with their types, and columns it removes.
    adds: ClassVar[pa.Schema] = pa.schema([])
    drops: ClassVar[tuple[str, ...]] = ()
    pool: ClassVar[PoolKind] = "light"
    #: False when the stage holds nothing worth keeping between batches (runners may run it as a plain task).
    stateful: ClassVar[bool] = True
    #: A plugin's stage: the stage it comes after in the order rows meet them (None: after the ranking stages).
    after: ClassVar[str | None] = None
    #: A plugin's stage: the pydantic model of its block under the run config's `settings:` (None: it takes none).
    settings: ClassVar[type[BaseModel] | None] = None

    def __init__(self, resources: Resources):
        self.resources = resources
        self.config = resources.config

    def __call__(self, batch: pa.Table) -> pa.Table:
        raise NotImplementedError

    @classmethod
    def planned_prompts(cls, prompts: Prompts, n: int, question_chars: int, contexts: int, context_chars: float
                        ) -> tuple[float, int]:  # fmt: skip
        """For a stage that makes prompts for `generate`: the characters of its `n` prompts (their questions have
        `question_chars` in all; each shows `contexts` contexts of `context_chars` on average) and the most tokens
        each answer may take. `t2rag plan` counts a method's generations by it."""
        raise NotImplementedError(f"stage {cls.name} makes no prompts")

    def own_settings(self) -> BaseModel:
        """This stage's validated block of the run's `settings:` (its model's defaults where the run gives none)."""
        if self.settings is None:
            raise PluginError(f"stage {self.name} declares no settings")
        return validated_settings(self.name, self.settings, self.config.settings)

    def without_drops(self, batch: pa.Table) -> pa.Table:
        """The batch without the columns this stage declares it drops."""
        return batch.drop_columns([c for c in self.drops if c in batch.column_names])


#: Called after each stage of a chain with the stage's name, the rows it returned and the seconds it took.
OnStage = Callable[[str, int, float], None]


def run_chain(steps: Sequence[tuple[str, Stage]], batch: pa.Table, on_stage: OnStage | None = None) -> pa.Table:
    """The batch through the built stages in order: the one loop every runner runs (the single-process runner, the
    Ray actors and the Serve replicas). A stage given a batch without a column it declares it reads fails here,
    naming the stage and the columns; a plugin's stage that rewrites rankings is held to `checked_ranking`."""
    for name, stage in steps:
        missing = [c for c in stage.reads if c not in batch.column_names]
        if missing:
            raise ValueError(f"stage {name} reads {missing}, which the batch lacks (it has {batch.column_names})")
        start = time.perf_counter()
        before, batch = batch, stage(batch)
        seconds = time.perf_counter() - start
        if "context_ids" in before.column_names and "context_ids" in stage.adds.names \
                and not plugins.origin_of("t2rag.stages", name).built_in:  # fmt: skip
            checked_ranking(name, before, batch)
        if on_stage is not None:
            on_stage(name, batch.num_rows, seconds)
    return batch


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


#: The columns that name the corpus a row searches: `corpus` (served requests: a subset's name or `pooled`), else the
#: row's `subset` (runs: the question's subset, whose corpus the run's config gives).
CORPUS_COLUMNS = ("corpus", "subset")


def corpus_column(batch: pa.Table) -> pa.ChunkedArray:
    """The name of the corpus each row searches (see CORPUS_COLUMNS), for `Resources.corpus` and its kin."""
    for name in CORPUS_COLUMNS:
        if name in batch.column_names:
            return batch.column(name)
    raise ValueError(f"rows need a `corpus` or `subset` column to name their corpus (have {batch.column_names})")


def with_search_keys(batch: pa.Table, default_k: int | None = None) -> pa.Table:
    """The batch with `_corpus` (see corpus_column) and, given the run's k, `_k` (see row_k): to group rows by what
    they search."""
    keys = {"_corpus": corpus_column(batch)}
    if default_k is not None:
        keys["_k"] = pa.array(row_k(batch, default_k), pa.int64())
    return with_columns(batch, keys)


def row_k(batch: pa.Table, default: int) -> list[int]:
    """Contexts per question: the optional `k` column (served requests), else the run's k."""
    return [default if k is None else int(k) for k in column(batch, "k")]


def checked_ranking(name: str, before: pa.Table, after: pa.Table) -> None:
    """Refuse what a plugin stage `name` that rewrites rankings returned: rows dropped or added, or a ranking
    naming a context that was not among its row's candidates (one line naming the plugin)."""
    where = f"plugin {plugins.origin_of('t2rag.stages', name).label}: stage '{name}' returned"
    if after.num_rows != before.num_rows:
        raise PluginError(f"{where} {after.num_rows} rows for {before.num_rows} (a reranker keeps every row)")
    olds, news = before.column("context_ids").to_pylist(), after.column("context_ids").to_pylist()
    for i, (old, new) in enumerate(zip(olds, news, strict=True)):
        outside = sorted(set(new or ()) - set(old or ()))
        if outside:
            raise PluginError(f"{where} context '{outside[0]}' for row {i}, which is not among its candidates")
