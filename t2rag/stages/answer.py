"""The answering stages: what the generator reads, the answer prompt, and the parsed, scored prediction."""

from __future__ import annotations

import pyarrow as pa

from t2rag.answer import predict
from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.requests import REQUEST_TYPES, request_columns
from t2rag.methods import get_method, readers_of
from t2rag.metrics.answers import ANSWER_SCORE_TYPES, answer_scores
from t2rag.metrics.number_match import number_match_one
from t2rag.prompts import ANSWER_SCHEMA
from t2rag.run_folder.outcomes import outcomes
from t2rag.stages.base import CORPUS_COLUMNS, Stage, column, groups, row_k, set_rows, with_columns, with_search_keys

TEXTS_TYPE = pa.list_(pa.string())


class ReadContexts(Stage):
    """`context_ids` (retrieving methods), `gold_context` (oracle), `k`, `reader_ids` (optional) -> `reader_texts`.

    What the generator reads, as the row's method prescribes: nothing, the gold context, the top k retrieved
    contexts, or the top k retrieved contexts' summaries; where a grade chose them (`reader_ids`, t2rag.stages.grade),
    exactly those contexts.
    """

    name = "read_contexts"
    reads = ("method",)
    optional = (*CORPUS_COLUMNS, "context_ids", "gold_context", "k", "reader_ids")
    adds = pa.schema({"reader_texts": TEXTS_TYPE})

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts: list = [None] * batch.num_rows
        ranked = column(batch, "context_ids")
        chosen = column(batch, "reader_ids")
        gold = column(batch, "gold_context")
        ks = row_k(batch, self.config.retrieval.k)
        named = any(c in batch.column_names for c in CORPUS_COLUMNS)
        keyed, keys = (with_search_keys(batch), ("method", "_corpus")) if named else (batch, ("method",))
        for key, rows in groups(keyed, *keys):
            method, corpus_name = get_method(key[0]), key[-1] if len(key) > 1 else None
            if method.reader == "none":
                set_rows(texts, rows, [[] for _ in rows])
                continue
            if method.reader == "gold":
                set_rows(texts, rows, [[gold[i]] for i in rows])
                continue
            if corpus_name is None:
                raise ValueError(f"read_contexts: rows of method {method.name} need a `corpus` or `subset` column")
            corpus = self.resources.corpus(corpus_name)
            if method.reader == "retrieved_summary":
                corpus = self.resources.context_summary_corpus(corpus)
            read = [chosen[i] if chosen[i] is not None else ranked[i][: method.texts_read(ks[i])] for i in rows]
            set_rows(texts, rows, [corpus.texts_of(ids) for ids in read])
        return with_columns(batch, {"reader_texts": pa.array(texts, TEXTS_TYPE)})


class AnswerPrompts(Stage):
    """`question`, `reader_texts` -> `messages_json`, `params_json`, `prompt_hash`, and `table_text` (the texts
    whose markdown tables feed the formula's table operations)."""

    name = "answer_prompts"
    reads = ("question", "reader_texts")
    adds = pa.schema({**REQUEST_TYPES, "prompt_hash": pa.string(), "table_text": pa.string()})

    @property
    def params(self) -> SamplingParams:
        generator = self.resources.generator_config
        schema = ANSWER_SCHEMA if generator.constrained_json else None
        return generator.sampling.model_copy(update={"json_schema": schema})

    def __call__(self, batch: pa.Table) -> pa.Table:
        prompts, params = self.resources.prompts, self.params
        contexts = batch.column("reader_texts").to_pylist()
        questions = batch.column("question").to_pylist()
        requests = [ChatRequest(prompts.answer(q, c), params) for q, c in zip(questions, contexts, strict=True)]
        return with_columns(
            batch,
            {
                **request_columns(requests),
                "prompt_hash": pa.array([r.prompt_hash() for r in requests], pa.string()),
                "table_text": pa.array(["\n\n".join(c) if c else None for c in contexts], pa.string()),
            },
        )


SCORE_TYPES: dict[str, pa.DataType] = {
    "formula": pa.string(),
    "prediction_source": pa.string(),
    "prediction": pa.float64(),
    "json_ok": pa.bool_(),
    "formula_ok": pa.bool_(),
    "number_match": pa.bool_(),
    "reasoning_steps": pa.list_(pa.string()),
    "outcome": pa.string(),
    **ANSWER_SCORE_TYPES,
}


class ParseAnswers(Stage):
    """`raw_output`, `table_text`, `reference`, `original_answer`, `program`, `question`, `subset`, `method`,
    `gold_rank` -> `formula`,
    `prediction_source`, `prediction`, `json_ok`, `formula_ok`, `number_match`, `reasoning_steps`, `outcome` (the
    answer module's policy, then Number Match and why it failed: t2rag.run_folder.outcomes), and the family's
    yardsticks `em`, `f1`, `em_error`, `exe_acc`, `program_acc` (t2rag.metrics.answers; EM and F1 null without
    `original_answer`, program accuracy without `program`). Without `reference` (a served answer) nothing is
    scored: those columns are null."""

    name = "parse_answers"
    reads = ("raw_output",)
    optional = ("table_text", "reference", "original_answer", "program", "question", "subset", "method", "gold_rank")
    adds = pa.schema(SCORE_TYPES)
    stateful = False

    def __call__(self, batch: pa.Table) -> pa.Table:
        cols: dict[str, list] = {name: [] for name in SCORE_TYPES if name not in ANSWER_SCORE_TYPES}
        outputs = batch.column("raw_output").to_pylist()
        tables = column(batch, "table_text")
        scored = "reference" in batch.column_names  # without references (served answers) nothing is scored
        references = column(batch, "reference")
        for text, table, reference in zip(outputs, tables, references, strict=True):
            pred = predict(text or "", table=table)
            cols["formula"].append(pred.formula)
            cols["prediction_source"].append(pred.source)
            cols["prediction"].append(pred.value)
            cols["json_ok"].append(pred.json_ok)
            cols["formula_ok"].append(pred.formula_ok)
            cols["number_match"].append(number_match_one(pred.value, reference) if scored else None)
            cols["reasoning_steps"].append(list(pred.reasoning_steps))
        parsed = {name: pa.array(v, SCORE_TYPES[name]) for name, v in cols.items() if name != "outcome"}
        if scored:
            parsed.update(answer_scores(cols["prediction"], cols["formula"], references,
                                        column(batch, "original_answer"), column(batch, "program"),
                                        column(batch, "question"), column(batch, "subset")))  # fmt: skip
        else:
            parsed.update({name: pa.nulls(batch.num_rows, dtype) for name, dtype in ANSWER_SCORE_TYPES.items()})
        outcome = pa.nulls(batch.num_rows, pa.string())
        if scored and "method" in batch.column_names:
            rows = with_columns(batch, parsed)
            if "gold_rank" not in rows.column_names:
                rows = rows.append_column("gold_rank", pa.nulls(batch.num_rows, pa.int32()))
            outcome = outcomes(rows, self.config.retrieval.k, readers_of(rows.column("method").to_pylist()))
        return with_columns(batch, {**parsed, "outcome": outcome})
