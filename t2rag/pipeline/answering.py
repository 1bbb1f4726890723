"""Prompt building, generation and answer scoring steps, shared by every runner."""

from __future__ import annotations

from collections.abc import Sequence

from t2rag.answer import predict
from t2rag.data.corpus import Corpus
from t2rag.generation.base import ChatRequest, Generation, SamplingParams
from t2rag.generation.config import GeneratorConfig
from t2rag.methods import Method
from t2rag.metrics.number_match import number_match_one
from t2rag.prompts import ANSWER_SCHEMA, Prompts


def answer_params(generator: GeneratorConfig) -> SamplingParams:
    """The generator's sampling settings, with the answer schema when output is constrained."""
    schema = ANSWER_SCHEMA if generator.constrained_json else None
    return generator.sampling.model_copy(update={"json_schema": schema})


def reader_contexts(
    method: Method,
    k: int,
    gold_contexts: Sequence[str],
    ranked_ids: Sequence[Sequence[str]] | None,
    corpus: Corpus | None,
    summaries: Corpus | None = None,
) -> list[list[str]]:
    """The texts the generator reads for each question, as the method prescribes."""
    if method.reads == "none":
        return [[] for _ in gold_contexts]
    if method.reads == "gold":
        return [[c] for c in gold_contexts]
    source = summaries if method.reads == "retrieved_summary" else corpus
    if source is None or ranked_ids is None:
        raise ValueError(f"method {method.name} reads retrieved texts but none were given")
    text_of = dict(zip(source.context_ids, source.texts, strict=True))
    return [[text_of[cid] for cid in ids[:k]] for ids in ranked_ids]


def answer_requests(
    prompts: Prompts, params: SamplingParams, questions: Sequence[str], contexts: Sequence[list[str]]
) -> list[ChatRequest]:
    return [ChatRequest(prompts.answer(q, ctx), params) for q, ctx in zip(questions, contexts, strict=True)]


def answer_columns(
    requests: Sequence[ChatRequest],
    generations: Sequence[Generation],
    contexts: Sequence[list[str]],
    references: Sequence[float | None],
) -> dict[str, list]:
    """Record columns for generated answers: generation metadata plus parsed and scored predictions."""
    cols: dict[str, list] = {
        "prompt_hash": [r.prompt_hash() for r in requests],
        "raw_output": [g.text for g in generations],
        "prompt_tokens": [g.prompt_tokens for g in generations],
        "completion_tokens": [g.completion_tokens for g in generations],
        "generation_s": [round(g.seconds, 4) for g in generations],
        "generation_error": [g.error for g in generations],
    }
    tables = ["\n\n".join(ctx) if ctx else None for ctx in contexts]
    cols.update(score_outputs(cols["raw_output"], tables, references))
    return cols


def score_outputs(
    texts: Sequence[str], tables: Sequence[str | None], references: Sequence[float | None]
) -> dict[str, list]:
    """Parse each output with the answer module (tables feed table_* operations) and apply Number Match."""
    cols: dict[str, list] = {k: [] for k in SCORE_COLUMNS}
    for text, table, ref in zip(texts, tables, references, strict=True):
        pred = predict(text or "", table=table)
        cols["formula"].append(pred.formula)
        cols["prediction_source"].append(pred.source)
        cols["prediction"].append(pred.value)
        cols["json_ok"].append(pred.json_ok)
        cols["formula_ok"].append(pred.formula_ok)
        cols["number_match"].append(number_match_one(pred.value, ref))
    return cols


SCORE_COLUMNS = ("formula", "prediction_source", "prediction", "json_ok", "formula_ok", "number_match")


def hyde_requests(prompts: Prompts, questions: Sequence[str], generator: GeneratorConfig) -> list[ChatRequest]:
    params = generator.sampling.model_copy(update={"max_tokens": prompts.config.hyde_max_tokens, "json_schema": None})
    return [ChatRequest(prompts.hyde(q), params) for q in questions]


def summary_requests(prompts: Prompts, texts: Sequence[str], generator: GeneratorConfig) -> list[ChatRequest]:
    params = generator.sampling.model_copy(
        update={"max_tokens": prompts.config.summary_max_tokens, "json_schema": None}
    )
    return [ChatRequest(prompts.summarize(t), params) for t in texts]
