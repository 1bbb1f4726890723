"""Read T2-RAGBench parquet files into one validated table with the unified schema."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.answer import parse_number
from t2rag.data.schema import CONTEXT_ONLY, QUESTION_SCHEMA, REQUIRED_COLUMNS, SUBSETS
from t2rag.data.source import DataSource, SourceFile, list_source_files, materialize, resolve_source
from t2rag.errors import DataError

log = logging.getLogger(__name__)

EXCLUSION_REASONS = ("empty_question", "empty_context", "empty_context_id")


@dataclass(frozen=True)
class QuestionSet:
    """All loaded questions in the unified schema, excluded rows included (they carry `excluded_reason`)."""

    table: pa.Table
    source: str
    files: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def subsets(self) -> list[str]:
        """Subset names present, in the benchmark's order (FinQA, ConvFinQA, TAT-DQA, then others)."""
        present = set(self.table.column("subset").to_pylist())
        known = [s for s in SUBSETS if s in present]
        return known + sorted(present - set(known))

    def subset(self, name: str) -> QuestionSet:
        """The questions of one subset."""
        mask = pc.equal(self.table.column("subset"), name)
        return QuestionSet(self.table.filter(mask), self.source, self.files)

    def scored(self) -> pa.Table:
        """Rows that are scored: those without an exclusion reason."""
        return self.table.filter(pc.is_null(self.table.column("excluded_reason")))

    def take_ids(self, ids: Sequence[str]) -> pa.Table:
        """Rows for the given question ids, in that order; unknown ids raise DataError."""
        index = {qid: i for i, qid in enumerate(self.table.column("id").to_pylist())}
        missing = [qid for qid in ids if qid not in index]
        if missing:
            raise DataError(f"{len(missing)} ids are not in the data, e.g. {missing[:3]}")
        return self.table.take(pa.array([index[qid] for qid in ids], pa.int64()))


def load_questions(
    data: str | DataSource | None = None,
    subsets: Sequence[str] | None = None,
    split: str | None = None,
) -> QuestionSet:
    """Load, unify and validate T2-RAGBench questions.

    `data` is a hub id (optionally `@revision`), a local directory, an `s3://` prefix, or None for the bundled
    sample. `subsets` and `split` select what to read; without them every subset and split present is loaded.
    """
    source = data if isinstance(data, DataSource) else resolve_source(data)
    wanted = list(subsets) if subsets else None
    fs, root, display = materialize(source, wanted)
    files = list_source_files(fs, root, display)
    present = sorted({f.subset for f in files})
    if wanted:
        unknown = [s for s in wanted if s not in present]
        if unknown:
            raise DataError(f"{display}: subset(s) {unknown} not found; present: {present}")
        files = [f for f in files if f.subset in wanted]
    if split:
        files = [f for f in files if f.split in (None, split)]
        if not files:
            raise DataError(f"{display}: no files for split '{split}'")

    tables = [_read_file(fs, f) for f in files]
    table = pa.concat_tables(tables, promote_options="default")
    if split:
        table = table.filter(pc.equal(table.column("split"), split))
        if table.num_rows == 0:
            raise DataError(f"{display}: no rows with split '{split}'")
    table = _add_derived(table)
    _check_ids(table, display)
    qs = QuestionSet(table=table, source=source.describe(), files=tuple(f.uri for f in files))
    _log_anomalies(qs)
    return qs


def _read_file(fs: pafs.FileSystem, f: SourceFile) -> pa.Table:
    try:
        raw = pq.read_table(f.path, filesystem=fs)
    except (OSError, pa.ArrowInvalid) as exc:
        raise DataError(f"{f.uri}: cannot read parquet: {exc}") from exc
    for name in REQUIRED_COLUMNS:
        if name not in raw.column_names:
            raise DataError(f"{f.uri}: missing required column '{name}'")
    return unify_table(raw, f.subset, f.uri)


def unify_table(raw: pa.Table, subset: str, origin: str) -> pa.Table:
    """Cast one file's table to the unified schema; absent known columns become null, extras become strings."""
    n = raw.num_rows
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for fld in QUESTION_SCHEMA:
        if fld.name == "subset":
            columns["subset"] = pa.array([subset] * n, pa.string())
        elif fld.name in ("answer_value", "excluded_reason"):
            continue  # derived after concatenation
        elif fld.name in raw.column_names:
            columns[fld.name] = _cast(raw.column(fld.name), fld.type, origin, fld.name)
        else:
            columns[fld.name] = pa.nulls(n, fld.type)
    for name in raw.column_names:
        if name not in columns and name not in ("answer_value", "excluded_reason", "subset"):
            columns[name] = _cast(raw.column(name), pa.string(), origin, name)
    return pa.table(columns)


def _cast(column: pa.ChunkedArray, dtype: pa.DataType, origin: str, name: str) -> pa.ChunkedArray:
    if column.type == dtype:
        return column
    try:
        return column.cast(dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DataError(f"{origin}: column '{name}' of type {column.type} cannot be read as {dtype}: {exc}") from exc


def _blank(column: pa.ChunkedArray) -> np.ndarray:
    trimmed = pc.utf8_trim_whitespace(column.fill_null(""))
    return pc.equal(pc.utf8_length(trimmed), 0).to_numpy(zero_copy_only=False)


def _add_derived(table: pa.Table) -> pa.Table:
    values = [parse_number(v) for v in table.column("program_answer").to_pylist()]
    answer = pa.array(values, pa.float64())
    reason = np.full(table.num_rows, None, dtype=object)
    # A row with a context and no question nor answer is a context alone (a corpus-only source, as a split's
    # contexts without their questions): not a question to score, and not a problem.
    answers = [table.column(c) for c in ("program_answer", "original_answer") if c in table.column_names]
    reason[_blank(table.column("question")) & np.logical_and.reduce([_blank(a) for a in answers])] = CONTEXT_ONLY
    # Later checks win only where no earlier reason is set, so the first problem of a row is reported.
    for name, label in (
        ("question", "empty_question"),
        ("context", "empty_context"),
        ("context_id", "empty_context_id"),
    ):
        blank = _blank(table.column(name))
        reason[blank & (reason == None)] = label  # noqa: E711 - elementwise comparison on an object array
    table = table.append_column(pa.field("answer_value", pa.float64()), answer)
    return table.append_column(pa.field("excluded_reason", pa.string()), pa.array(reason.tolist(), pa.string()))


def _check_ids(table: pa.Table, display: str) -> None:
    ids = table.column("id")
    if ids.null_count or bool(pc.any(pc.equal(pc.utf8_length(ids.fill_null("")), 0)).as_py()):
        raise DataError(f"{display}: {ids.null_count or 'some'} rows have no question id")
    if pc.count_distinct(ids).as_py() != table.num_rows:
        counts = Counter(ids.to_pylist())
        dups = [qid for qid, c in counts.items() if c > 1]
        raise DataError(f"{display}: {len(dups)} duplicate question ids, e.g. {dups[:5]}")


def _log_anomalies(qs: QuestionSet) -> None:
    table = qs.table
    contexts_only = pc.equal(table.column("excluded_reason").fill_null(""), CONTEXT_ONLY)
    alone = int(pc.sum(contexts_only).as_py() or 0)
    if alone:
        log.info("%s: %d rows are contexts without a question (they extend corpora and are not scored)", qs.source,
                 alone)  # fmt: skip
        table = table.filter(pc.invert(contexts_only))
    excluded = table.filter(pc.is_valid(table.column("excluded_reason")))
    if excluded.num_rows:
        log.warning(
            "%d rows excluded from scoring (kept in the data): %s",
            excluded.num_rows,
            ", ".join(
                f"{i} ({r})"
                for i, r in zip(
                    excluded["id"].to_pylist()[:10], excluded["excluded_reason"].to_pylist()[:10], strict=True
                )
            ),
        )
    non_numeric = int(pc.sum(pc.is_null(table.column("answer_value"))).as_py() or 0)
    if non_numeric:
        log.info("%d reference answers are not numbers; they count as unmatched in Number Match", non_numeric)
