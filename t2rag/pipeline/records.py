"""Per-question result records: one row per (method, question id), written by every engine in blocks, read by
the summary, `t2rag score` and `t2rag report`. The columns (the stage that fills each is in t2rag.stages):

| column | type | stage | meaning |
|---|---|---|---|
| id, subset, method | string | plan | question id, its subset, the method name |
| context_ids | list<string> | retrieve, rerank, grade_contexts, corrective_retrieve | ranked context ids (null: none) |
| scores | list<float64> | retrieve, rerank, grade_contexts, corrective_retrieve | their scores (NaN: none given) |
| gold_rank | int32 | retrieve, rerank, grade_contexts, corrective_retrieve | the gold's 1-based rank (0: absent) |
| reader_ids | list<string> | grade_contexts, corrective_retrieve | what a grade chose to read (null: the top k) |
| relevant | int32 | grade_contexts | contexts the generator judged relevant (null: no grade read) |
| prompt_hash | string | answer_prompts | hash of the chat messages sent to the generator |
| raw_output | string | generate | the model's text (null: not generated) |
| prompt_tokens, completion_tokens | int32 | generate | token counts reported by the engine |
| cached_prompt_tokens | int32 | generate | prompt tokens the engine reused (all for a cache hit; null: not said) |
| generation_s | float64 | generate | seconds spent generating (0 for a cache hit) |
| generation_error | string | generate | why the engine gave no text (the question then counts as wrong) |
| formula, prediction_source | string | parse_answers | formula read from the output; which field gave the prediction |
| prediction | float64 | parse_answers | the predicted number, null when none could be read |
| json_ok, formula_ok, number_match | bool | parse_answers | output parsed as JSON; formula evaluated; Number Match |
| outcome | string | parse_answers | why the answer is right or wrong (t2rag.metrics.outcomes; null: not answered) |
| reference | float64 | plan | the reference answer as a number (null when it is not one) |
"""

from __future__ import annotations

import logging
import re
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.errors import InputError, first_line
from t2rag.generation.base import REJECTED
from t2rag.metrics.retrieval import per_query
from t2rag.metrics.summary import DEFAULT_RETRIEVAL_METRICS, SubsetTotals, ordered_subsets, summary_from_totals
from t2rag.storage import filesystem_for, is_s3, join, write_bytes

RECORD_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("subset", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("context_ids", pa.list_(pa.string())),
        pa.field("scores", pa.list_(pa.float64())),
        pa.field("gold_rank", pa.int32()),
        pa.field("reader_ids", pa.list_(pa.string())),
        pa.field("relevant", pa.int32()),
        pa.field("prompt_hash", pa.string()),
        pa.field("raw_output", pa.string()),
        pa.field("prompt_tokens", pa.int32()),
        pa.field("completion_tokens", pa.int32()),
        pa.field("cached_prompt_tokens", pa.int32()),
        pa.field("generation_s", pa.float64()),
        pa.field("generation_error", pa.string()),
        pa.field("formula", pa.string()),
        pa.field("prediction_source", pa.string()),
        pa.field("prediction", pa.float64()),
        pa.field("json_ok", pa.bool_()),
        pa.field("formula_ok", pa.bool_()),
        pa.field("number_match", pa.bool_()),
        pa.field("reference", pa.float64()),
        pa.field("outcome", pa.string()),
    ]
)

RECORDS_DIR = "records"

log = logging.getLogger(__name__)


#: What the shared answering tail (`generate`, `parse_answers`) needs besides the record columns: the requests
#: and the table text the parser evaluates formulas against.
ANSWER_INPUT_SCHEMA = pa.schema(
    [
        *RECORD_SCHEMA,
        pa.field("messages_json", pa.string()),
        pa.field("params_json", pa.string()),
        pa.field("table_text", pa.string()),
    ]
)


def project(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """`batch` with exactly the schema's columns, cast to its types (columns the batch lacks are null)."""
    columns = {}
    for fld in schema:
        if fld.name in batch.column_names:
            columns[fld.name] = pc.cast(batch.column(fld.name), fld.type)
        else:
            columns[fld.name] = pa.nulls(batch.num_rows, fld.type)
    return pa.table(columns, schema=schema)


def to_records(batch: pa.Table) -> pa.Table:
    """Project a stage batch onto the record schema."""
    return project(batch, RECORD_SCHEMA)


def to_answer_inputs(batch: pa.Table) -> pa.Table:
    """Project a batch that has its answer prompts onto one schema, so rows of every method can share one
    generator (one engine) for the rest of their stages."""
    return project(batch, ANSWER_INPUT_SCHEMA)


def new_part_name(engine: str) -> str:
    """A record file name no other writer (engine, process or attempt) will choose."""
    return f"{engine}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"


def write_records(out: str, table: pa.Table, part: str) -> str:
    """Write one block of records atomically (see `write_bytes`)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(table.cast(RECORD_SCHEMA), buffer)
    return write_bytes(join(out, RECORDS_DIR, f"{_safe(part)}.parquet"), buffer.getvalue().to_pybytes())


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name)


def record_files(out: str) -> tuple[pafs.FileSystem, list[str]]:
    fs, path = filesystem_for(join(out, RECORDS_DIR))
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


#: The record columns the metrics read.
METRIC_COLUMNS = ["method", "subset", "gold_rank", "number_match", "reference"]


def metric_values(table: pa.Table, retrieval_metrics: tuple[str, ...]) -> pa.Table:
    """Per-record values whose per-(method, subset) sums are the summary totals (see SubsetTotals).

    A record counts as generated when it has a Number Match verdict and as retrieved when it has a gold rank.
    """
    generated = pc.is_valid(table.column("number_match")).to_numpy(zero_copy_only=False)
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


def summarize_records(
    records: pa.Table, retrieval_metrics: tuple[str, ...] = DEFAULT_RETRIEVAL_METRICS
) -> dict[str, dict]:
    """Per-method summaries from records: the one scoring route of runs, reports and `t2rag score`.

    Methods come in order of first appearance; nothing is parsed or ranked again.
    """
    if records.num_rows == 0:
        return {}
    values = metric_values(records, retrieval_metrics)
    sums = ["generated", "matched", "non_numeric", "retrieved", *retrieval_metrics]
    grouped = values.group_by(["method", "subset"]).aggregate([("method", "count"), *((c, "sum") for c in sums)])
    totals: dict[str, dict[str, SubsetTotals]] = {}
    for r in grouped.to_pylist():
        totals.setdefault(r["method"], {})[r["subset"]] = SubsetTotals(
            questions=int(r["method_count"]),
            generated=int(r["generated_sum"]),
            matched=int(r["matched_sum"]),
            non_numeric=int(r["non_numeric_sum"]),
            retrieved=int(r["retrieved_sum"]),
            metric_sums={m: float(r[f"{m}_sum"]) for m in retrieval_metrics},
        )
    order = list(dict.fromkeys(records.column("method").to_pylist()))
    return {m: summary_from_totals(totals[m], retrieval_metrics) for m in order}


#: The record columns `generation_usage` reads.
USAGE_COLUMNS = ["method", "subset", "number_match", "prompt_tokens", "cached_prompt_tokens"]


def generation_usage(records: pa.Table) -> dict[str, dict]:
    """Prompt tokens of the generated records (those with a Number Match verdict), per method: per subset and over
    all of them (`all`), in total, those the engine reused instead of computing (None where no record's engine
    says), and their share in percent of the prompt tokens of the records that say. Engine measurements, like
    timings: kept apart from the metrics, which every engine must agree on."""
    generated = records.filter(pc.is_valid(records.column("number_match")))
    if generated.num_rows == 0:
        return {}
    prompt = pc.cast(generated.column("prompt_tokens").fill_null(0), pa.int64())
    reported = pc.is_valid(generated.column("cached_prompt_tokens"))
    values = pa.table(
        {
            "method": generated.column("method"),
            "subset": generated.column("subset"),
            "prompt": prompt,
            "cached": pc.cast(generated.column("cached_prompt_tokens").fill_null(0), pa.int64()),
            "reported_prompt": pc.if_else(reported, prompt, 0),
            "reported": pc.cast(reported, pa.int64()),
        }
    )
    sums = ("prompt", "cached", "reported_prompt", "reported")
    grouped = values.group_by(["method", "subset"]).aggregate([(c, "sum") for c in sums])
    cells: dict[str, dict[str, tuple[int, ...]]] = {}
    for r in grouped.to_pylist():
        cells.setdefault(r["method"], {})[r["subset"]] = tuple(int(r[f"{c}_sum"]) for c in sums)
    out = {}
    for method in dict.fromkeys(generated.column("method").to_pylist()):
        subsets = cells[method]
        total = tuple(sum(v[i] for v in subsets.values()) for i in range(len(sums)))
        out[method] = {
            "subsets": {s: _usage(*subsets[s]) for s in ordered_subsets(list(subsets))},
            "all": _usage(*total),
        }
    return out


def _usage(prompt: int, cached: int, reported_prompt: int, reported: int) -> dict[str, int | float | None]:
    return {
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached if reported else None,
        "cached_share": round(100 * cached / reported_prompt, 2) if reported_prompt else None,
    }
