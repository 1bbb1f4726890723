"""The record format: one row per (method, question id), written by every runner in blocks
(`t2rag.run_folder.files`) and read here for everything made of a run (`t2rag.results`). The columns (the stage
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
| outcome | string | parse_answers | why the answer is right or wrong (t2rag.run_folder.outcomes; null: not answered) |
| em, f1 | float64 | parse_answers | TAT-QA's Exact Match (0/1) and F1 against `original_answer` (null: none) |
| em_error | string | parse_answers | scale, sign or scale_sign: what mends an EM miss (t2rag.metrics.tatqa) |
| percent_reading | string | parse_answers | percent, plain, undecided: how a bare TAT-DQA gold is read (percent_rule) |
| em_if_percent | float64 | parse_answers | EM with that gold read in percent points, where the reading is undecided |
| exe_acc, program_acc | bool | parse_answers | FinQA's execution and program accuracy (null: no gold program) |
| corpus | string | route | the corpus a routed method searched: a subset's, several joined by +, or pooled |
| routed_subsets | list<string> | route | the router's ranking of the loaded subsets (null: not routed) |
| routing_acc | bool | route | the router's top subset is the question's (null: not routed, or no subset known) |
| routing_ndcg3 | float64 | route | NDCG@3 of the router's ranking, the question's subset the relevant one |
| reference | float64 | plan | the reference answer as a number (null when it is not one) |
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.generation.base import REJECTED

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
        pa.field("percent_reading", pa.string()),
        pa.field("em_if_percent", pa.float64()),
        pa.field("exe_acc", pa.bool_()),
        pa.field("program_acc", pa.bool_()),
        pa.field("corpus", pa.string()),
        pa.field("routed_subsets", pa.list_(pa.string())),
        pa.field("routing_acc", pa.bool_()),
        pa.field("routing_ndcg3", pa.float64()),
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


#: What the shared answering tail (`generate`, `parse_answers`) needs besides the record columns: the requests,
#: the table text the parser evaluates formulas against, the gold answer as written (EM and F1), the gold program
#: (program accuracy) and the question (the percent rule of EM).
ANSWER_INPUT_SCHEMA = pa.schema(
    [
        *RECORD_SCHEMA,
        pa.field("messages_json", pa.string()),
        pa.field("params_json", pa.string()),
        pa.field("table_text", pa.string()),
        pa.field("original_answer", pa.string()),
        pa.field("program", pa.string()),
        pa.field("question", pa.string()),
    ]
)


def to_answer_inputs(batch: pa.Table) -> pa.Table:
    """Project a batch that has its answer prompts onto one schema, so rows of every method can share one
    generator (one engine) for the rest of their stages."""
    return project(batch, ANSWER_INPUT_SCHEMA)


def retryable(errors: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Which generation errors a retry may fix: every engine failure except a request the engine refused as
    given (`REJECTED`: a prompt longer than the context window fails the same way every time)."""
    failed = pc.is_valid(errors)
    rejected = pc.starts_with(errors.fill_null(""), REJECTED)
    return pc.and_(failed, pc.invert(rejected)).to_numpy(zero_copy_only=False)
