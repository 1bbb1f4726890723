"""The record format: one row per (method, question id), written by every runner in blocks
(`t2rag.pipeline.records`) and read here for everything made of a run (`t2rag.results`). The columns (the stage
that fills each is in t2rag.stages):

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
| outcome | string | parse_answers | why the answer is right or wrong (t2rag.results.outcomes; null: not answered) |
| em, f1 | float64 | parse_answers | TAT-QA's Exact Match (0/1) and F1 against `original_answer` (null: none) |
| em_error | string | parse_answers | scale, sign or scale_sign: what mends an EM miss (t2rag.metrics.tatqa) |
| exe_acc, program_acc | bool | parse_answers | FinQA's execution and program accuracy (null: no gold program) |
| corpus | string | route | the corpus a routed method searched: a subset's, several joined by +, or pooled |
| routed_subsets | list<string> | route | the router's ranking of the loaded subsets (null: not routed) |
| routing_acc | bool | route | the router's top subset is the question's (null: not routed, or no subset known) |
| routing_ndcg3 | float64 | route | NDCG@3 of the router's ranking, the question's subset the relevant one |
| reference | float64 | plan | the reference answer as a number (null when it is not one) |
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.errors import InputError, first_line
from t2rag.storage import filesystem_for, join

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
        pa.field("em", pa.float64()),
        pa.field("f1", pa.float64()),
        pa.field("em_error", pa.string()),
        pa.field("exe_acc", pa.bool_()),
        pa.field("program_acc", pa.bool_()),
        pa.field("corpus", pa.string()),
        pa.field("routed_subsets", pa.list_(pa.string())),
        pa.field("routing_acc", pa.bool_()),
        pa.field("routing_ndcg3", pa.float64()),
    ]
)

RECORDS_DIR = "records"


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
