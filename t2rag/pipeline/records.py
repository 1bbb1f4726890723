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
| generation_error | string | generations | why the engine gave no text (the question then counts as wrong) |
| formula, prediction_source | string | scores | formula read from the output; which field gave the prediction |
| prediction | float64 | scores | the predicted number, null when none could be read |
| json_ok, formula_ok, number_match | bool | scores | output parsed as JSON; formula evaluated; Number Match |
| reference | float64 | scores | the reference answer as a number (null when it is not one) |
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.metrics.retrieval import per_query
from t2rag.metrics.summary import SubsetTotals, summary_from_totals
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
        pa.field("generation_error", pa.string()),
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


def metric_values(table: pa.Table, retrieval_metrics: tuple[str, ...]) -> pa.Table:
    """Per-record values whose per-(method, subset) sums are the summary totals (see SubsetTotals)."""
    generated = pc.is_valid(table.column("raw_output")).to_numpy(zero_copy_only=False)
    matched = generated & table.column("number_match").fill_null(False).to_numpy(zero_copy_only=False)
    non_numeric = generated & pc.is_null(table.column("reference")).to_numpy(zero_copy_only=False)
    retrieved = pc.is_valid(table.column("gold_rank")).to_numpy(zero_copy_only=False)
    ranks = table.column("gold_rank").fill_null(0).to_numpy(zero_copy_only=False)
    columns = {
        "method": table.column("method"),
        "subset": table.column("subset"),
        "generated": generated.astype(np.int64),
        "matched": matched.astype(np.int64),
        "non_numeric": non_numeric.astype(np.int64),
        "retrieved": retrieved.astype(np.int64),
    }
    for metric in retrieval_metrics:
        columns[metric] = np.where(retrieved, per_query(metric, ranks), 0.0)
    return pa.table(columns)


def totals_from_sums(rows: list[dict], retrieval_metrics: tuple[str, ...]) -> dict[str, dict[str, SubsetTotals]]:
    """Per-method, per-subset totals from aggregated rows with `count` and `sum(<column>)` fields."""
    out: dict[str, dict[str, SubsetTotals]] = {}
    for row in rows:
        out.setdefault(row["method"], {})[row["subset"]] = SubsetTotals(
            questions=int(row["count()"]),
            generated=int(row["sum(generated)"]),
            matched=int(row["sum(matched)"]),
            non_numeric=int(row["sum(non_numeric)"]),
            retrieved=int(row["sum(retrieved)"]),
            metric_sums={m: float(row[f"sum({m})"]) for m in retrieval_metrics},
        )
    return out


def summarize_records(records: pa.Table, retrieval_metrics: tuple[str, ...]) -> dict[str, dict]:
    """Per-method summaries from records alone (no dataset needed), with the same totals as the Ray reduce."""
    if records.num_rows == 0:
        return {}
    values = metric_values(records, retrieval_metrics)
    sums = ["generated", "matched", "non_numeric", "retrieved", *retrieval_metrics]
    grouped = values.group_by(["method", "subset"]).aggregate([("method", "count"), *((c, "sum") for c in sums)])
    rows = [
        {
            "method": r["method"],
            "subset": r["subset"],
            "count()": r["method_count"],
            **{f"sum({c})": r[f"{c}_sum"] for c in sums},
        }
        for r in grouped.to_pylist()
    ]
    totals = totals_from_sums(rows, retrieval_metrics)
    order = list(dict.fromkeys(records.column("method").to_pylist()))
    return {m: summary_from_totals(totals[m], retrieval_metrics) for m in order}
