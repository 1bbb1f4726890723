"""A run's folder: the one place that names its files and reads and writes them.

    OUT/manifest.json   what ran, with which versions, on what, and how long each stage took (`build_manifest`)
    OUT/result.json     what the run finished with: scorecards, counts, usage, the plan beside the run
                        (summary.json in runs made before it was renamed)
    OUT/records/*.parquet  one row per (method, question), in blocks each written atomically under a name no other
                        writer chooses (`t2rag.run_folder.records` holds the format)
    OUT/report/         the tables and plots `t2rag report` writes
    OUT/judge/          the judge's verdicts and ratings (`t2rag judge`)

A folder is a local directory or an `s3://` prefix. Resuming reads the (method, id) pairs already done, and a retry
first releases the failed rows a retry may fix.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.errors import InputError, first_line
from t2rag.run_folder.records import RECORD_SCHEMA, project, retryable
from t2rag.storage import filesystem_for, is_s3, join, read_bytes, remove_torn_writes, write_bytes

log = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
#: What a run finished with (its scorecards, counts, generation usage, plan beside run), written by `finish_run`; runs
#: made before it was renamed have it as summary.json.
RESULT_FILE = "result.json"
EARLIER_RESULT_FILE = "summary.json"
RECORDS_DIR = "records"
REPORT_DIR = "report"
JUDGE_DIR = "judge"
VERDICTS_DIR = f"{JUDGE_DIR}/verdicts"
RATINGS_FILE = f"{JUDGE_DIR}/ratings.json"


def write_json(out: str, name: str, payload: dict) -> str:
    return write_bytes(join(out, name), json.dumps(payload, indent=2, default=str).encode())


def read_json(out: str, name: str) -> dict | None:
    """A JSON file of a run (None when absent); an unreadable one is an InputError naming it."""
    path = join(out, name)
    data = read_bytes(path)
    if data is None:
        return None
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise InputError(f"{path}: not a JSON object")
    return payload


def read_result(out: str) -> dict | None:
    """A run's result (RESULT_FILE, else the EARLIER_RESULT_FILE of an older run); None when it has neither."""
    result = read_json(out, RESULT_FILE)
    return result if result is not None else read_json(out, EARLIER_RESULT_FILE)


def read_manifest(out: str) -> dict | None:
    """A run's manifest (None when it has none)."""
    return read_json(out, MANIFEST_FILE)


def write_manifest(out: str, manifest: dict) -> str:
    return write_json(out, MANIFEST_FILE, manifest)


def write_result(out: str, result: dict) -> str:
    return write_json(out, RESULT_FILE, result)


def report_dir(out: str) -> str:
    """Where `t2rag report` writes a run's tables and plots by default."""
    return join(out, REPORT_DIR)


def has_records(out: str) -> bool:
    """Whether a folder is a run's: it has a records folder."""
    fs, path = filesystem_for(join(out, RECORDS_DIR))
    return fs.get_file_info(path).type == pafs.FileType.Directory


def record_files(out: str) -> tuple[pafs.FileSystem, list[str]]:
    return parquet_files(out, RECORDS_DIR)


def parquet_files(out: str, folder: str) -> tuple[pafs.FileSystem, list[str]]:
    """The parquet files under a folder of a run (local or `s3://`), sorted; none when the folder is missing."""
    fs, path = filesystem_for(join(out, folder))
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return fs, []
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    return fs, sorted(i.path for i in infos if i.path.endswith(".parquet"))


def read_records(out: str, columns: list[str] | None = None) -> pa.Table:
    """All records of a run (empty table when there are none), optionally only some columns."""
    fs, files = record_files(out)
    schema = RECORD_SCHEMA if columns is None else pa.schema([RECORD_SCHEMA.field(c) for c in columns])
    if not files:
        return schema.empty_table()
    try:
        return pads.dataset(files, filesystem=fs, format="parquet", schema=RECORD_SCHEMA).to_table(columns=columns)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{join(out, RECORDS_DIR)}: a record file is not readable ({first_line(exc)})") from None


@dataclass(frozen=True)
class LocatedRecords:
    """Some columns of a run's records, each row with where it is (`file`, `row`), so that its other columns can be
    read later for a few rows without reading them all (the explorer's question page)."""

    table: pa.Table
    fs: pafs.FileSystem
    files: list[str]

    def read_file(self, file: int, columns: list[str]) -> pa.Table:
        """Columns of every row of one record file (`file`: the index the table's `file` column holds); a column the
        file predates is null."""
        with self.fs.open_input_file(self.files[file]) as f:
            parquet = pq.ParquetFile(f)
            table = parquet.read(columns=[c for c in columns if c in parquet.schema_arrow.names])
        return project(table, pa.schema([RECORD_SCHEMA.field(c) for c in columns]))


def read_located(out: str, columns: list[str]) -> LocatedRecords:
    """The columns of every record of a run, file by file, with each row's `file` and `row`; a column older record
    files lack is null. Refuses a run without records."""
    fs, files = record_files(out)
    if not files:
        raise InputError(f"{out}: no records found under {join(out, RECORDS_DIR)}")
    parts = []
    for n, path in enumerate(files):
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            table = parquet.read(columns=[c for c in columns if c in parquet.schema_arrow.names])
        missing = [c for c in columns if c not in table.column_names]
        table = project(table, pa.schema([RECORD_SCHEMA.field(c) for c in columns])) if missing else table
        table = table.append_column("file", pa.array(np.full(table.num_rows, n, np.int32)))
        parts.append(table.append_column("row", pa.array(np.arange(table.num_rows, dtype=np.int32))))
    return LocatedRecords(pa.concat_tables(parts, promote_options="default"), fs, files)


def new_part_name(runner: str) -> str:
    """A record file name no other writer (runner, process or attempt) will choose."""
    return f"{runner}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"


def write_records(out: str, table: pa.Table, part: str) -> str:
    """Write one block of records atomically (see `write_bytes`)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(table.cast(RECORD_SCHEMA), buffer)
    return write_bytes(join(out, RECORDS_DIR, f"{_safe(part)}.parquet"), buffer.getvalue().to_pybytes())


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


def done_keys(out: str) -> set[tuple[str, str]]:
    """(method, id) pairs that already have records; unreadable (half-written) files, and the temporary files of
    writers that died mid-write, are removed."""
    remove_torn_writes(join(out, RECORDS_DIR))
    fs, files = record_files(out)
    keys: set[tuple[str, str]] = set()
    for path in files:
        try:
            table = pq.read_table(path, columns=["method", "id"], filesystem=fs)
        except (OSError, pa.ArrowInvalid):
            log.warning("removing unreadable record file %s (from an interrupted write)", path)
            fs.delete_file(path)
            continue
        keys.update(zip(table.column("method").to_pylist(), table.column("id").to_pylist(), strict=True))
    return keys


def release_failed(out: str) -> int:
    """Remove the records whose generation failed for a reason a retry may fix, so that they are computed again
    (a failed row is not done); returns how many. Each file holding one is rewritten atomically without them."""
    fs, files = record_files(out)
    released = 0
    for path in files:
        try:
            errors = pq.read_table(path, columns=["generation_error"], filesystem=fs).column("generation_error")
        except (OSError, pa.ArrowInvalid):
            continue  # done_keys removes unreadable files
        failed = retryable(errors)
        if not failed.any():
            continue
        table = pq.read_table(path, filesystem=fs)
        kept = table.filter(pa.array(~failed))
        if kept.num_rows:
            buffer = pa.BufferOutputStream()
            pq.write_table(kept.cast(RECORD_SCHEMA), buffer)
            uri = f"s3://{path}" if is_s3(out) else path
            write_bytes(uri, buffer.getvalue().to_pybytes())
        else:
            fs.delete_file(path)
        released += int(failed.sum())
    return released


def count_failed(out: str) -> int:
    """Records whose generation failed for a reason a retry may fix."""
    errors = read_records(out, ["generation_error"]).column("generation_error")
    return int(retryable(errors).sum())
