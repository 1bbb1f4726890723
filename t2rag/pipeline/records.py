"""Per-question result records: the Arrow columns every runner writes and `t2rag score`/`report` read.

Stages exchange these columns (questions -> retrievals -> prompts -> generations -> scores):

| column | type | stage | meaning |
|---|---|---|---|
| id, subset, method | string | questions | question id, its subset, the method name |
| context_ids | list<string> | retrievals | ranked context ids as returned (null: the method does not retrieve) |
| scores | list<float64> | retrievals | the retriever's scores, same order (NaN where a method has none) |
| gold_rank | int32 | retrievals | 1-based rank of the gold context, 0 when absent, null without retrieval |
| prompt_hash | string | prompts | hash of the chat messages sent to the generator |
| raw_output | string | generations | the model's text (null: not generated) |
| prompt_tokens, completion_tokens | int32 | generations | token counts reported by the engine |
| generation_s | float64 | generations | seconds spent generating (0 for a cache hit) |
| formula, prediction_source | string | scores | formula read from the output; which field gave the prediction |
| prediction | float64 | scores | the predicted number, null when none could be read |
| json_ok, formula_ok, number_match | bool | scores | output parsed as JSON; formula evaluated; Number Match |
| reference | float64 | scores | the reference answer as a number (null when it is not one) |
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.storage import filesystem_for, join

RECORD_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("subset", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("context_ids", pa.list_(pa.string())),
        pa.field("scores", pa.list_(pa.float64())),
        pa.field("gold_rank", pa.int32()),
        pa.field("prompt_hash", pa.string()),
        pa.field("raw_output", pa.string()),
        pa.field("prompt_tokens", pa.int32()),
        pa.field("completion_tokens", pa.int32()),
        pa.field("generation_s", pa.float64()),
        pa.field("formula", pa.string()),
        pa.field("prediction_source", pa.string()),
        pa.field("prediction", pa.float64()),
        pa.field("json_ok", pa.bool_()),
        pa.field("formula_ok", pa.bool_()),
        pa.field("number_match", pa.bool_()),
        pa.field("reference", pa.float64()),
    ]
)

RECORDS_DIR = "records"


def empty_columns(n: int) -> dict[str, list]:
    return {f.name: [None] * n for f in RECORD_SCHEMA}


def to_table(columns: dict[str, list]) -> pa.Table:
    """Build a record table; missing columns are null."""
    n = len(columns["id"])
    full = empty_columns(n)
    full.update(columns)
    return pa.table({f.name: pa.array(full[f.name], f.type) for f in RECORD_SCHEMA}, schema=RECORD_SCHEMA)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


def part_path(out: str, method: str, subset: str, part: str = "0") -> str:
    return join(out, RECORDS_DIR, f"{_safe(method)}__{_safe(subset)}__{part}.parquet")


def write_records(out: str, method: str, subset: str, table: pa.Table, part: str = "0") -> str:
    """Write one (method, subset) part atomically: to a temporary name, then renamed into place."""
    fs, path = filesystem_for(part_path(out, method, subset, part))
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = path + ".tmp"
    pq.write_table(table.cast(RECORD_SCHEMA), tmp, filesystem=fs)
    fs.move(tmp, path)
    return path


def read_records(out: str) -> pa.Table:
    """All records of a run (empty table when there are none)."""
    fs, path = filesystem_for(join(out, RECORDS_DIR))
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return RECORD_SCHEMA.empty_table()
    files = [i.path for i in fs.get_file_info(pafs.FileSelector(path, recursive=True)) if i.path.endswith(".parquet")]
    if not files:
        return RECORD_SCHEMA.empty_table()
    return pads.dataset(sorted(files), filesystem=fs, format="parquet", schema=RECORD_SCHEMA).to_table()
