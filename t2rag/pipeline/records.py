"""Writing a run's records and resuming from them: each block of records written atomically under a name no other
writer chooses, the (method, id) pairs already done, and the failed rows a retry may fix released. The record format
and reading are `t2rag.results.records`."""

from __future__ import annotations

import logging
import re
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from t2rag.generation.base import REJECTED
from t2rag.results.records import RECORD_SCHEMA, RECORDS_DIR, project, read_records, record_files
from t2rag.storage import is_s3, join, write_bytes

log = logging.getLogger(__name__)


#: What the shared answering tail (`generate`, `parse_answers`) needs besides the record columns: the requests,
#: the table text the parser evaluates formulas against, the gold answer as written (EM and F1) and the gold
#: program (program accuracy).
ANSWER_INPUT_SCHEMA = pa.schema(
    [
        *RECORD_SCHEMA,
        pa.field("messages_json", pa.string()),
        pa.field("params_json", pa.string()),
        pa.field("table_text", pa.string()),
        pa.field("original_answer", pa.string()),
        pa.field("program", pa.string()),
    ]
)


def to_answer_inputs(batch: pa.Table) -> pa.Table:
    """Project a batch that has its answer prompts onto one schema, so rows of every method can share one
    generator (one engine) for the rest of their stages."""
    return project(batch, ANSWER_INPUT_SCHEMA)


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
    """(method, id) pairs that already have records; unreadable (half-written) files are removed."""
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


def retryable(errors: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Which generation errors a retry may fix: every engine failure except a request the engine refused as
    given (`REJECTED`: a prompt longer than the context window fails the same way every time)."""
    failed = pc.is_valid(errors)
    rejected = pc.starts_with(errors.fill_null(""), REJECTED)
    return pc.and_(failed, pc.invert(rejected)).to_numpy(zero_copy_only=False)


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
