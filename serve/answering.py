"""A question's answer in the served app, by the batch runners's own stages on a one-row batch: its prompt
(`read_contexts`, `answer_prompts`) from what was retrieved or the given gold context, its record (`parse_answers`)
from the generation, and the record's answer fields, which /answer and the chat replies both return."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from serve import openai_api
from serve.errors import BadRequest
from serve.schemas import Context
from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.requests import REQUEST_COLUMNS, request_columns
from t2rag.methods import PROMPTING, Method
from t2rag.resources import Resources
from t2rag.stages import built
from t2rag.stages.base import run_chain, with_columns


@dataclass(frozen=True)
class Prepared:
    """A question's answer prompt, ready for the generator: the one-row batch with its request columns."""

    method: str
    corpus: str
    batch: pa.Table
    contexts: list[Context]
    seconds: dict[str, float]
    started: float
    retrieved: float

    @property
    def request(self) -> dict[str, str]:
        return self.batch.select(list(REQUEST_COLUMNS)).to_pylist()[0]

    def for_chat(self, body: openai_api.ChatCompletionRequest, generator: GeneratorConfig | None) -> Prepared:
        """The prompt with the chat's conversation and sampling parameters."""
        system, turns = body.conversation()
        messages = openai_api.with_conversation(json.loads(self.request["messages_json"]), system, turns)
        params = SamplingParams.model_validate_json(self.request["params_json"])
        default = generator.sampling if generator is not None else params
        changes = {
            "temperature": body.temperature if body.temperature is not None else default.temperature,
            "top_p": body.top_p if body.top_p is not None else default.top_p,
            "max_tokens": body.token_limit() or params.max_tokens,
            "seed": body.seed if body.seed is not None else params.seed,
            "stop": body.stops(),
        }
        request = ChatRequest(tuple(messages), params.model_copy(update=changes))
        return replace(self, batch=with_columns(self.batch, request_columns([request])))


class Answering:
    """The answering stages of one replica."""

    def __init__(self, resources: Resources):
        self.resources = resources
        self.prompting = built(resources, PROMPTING)
        self.parsing = built(resources, ("parse_answers",))

    def gold_context(self, context_id: str | None, corpus: str) -> Context:
        if context_id is None:
            raise BadRequest("method oracle reads a given gold context: pass its context_id")
        docs = self.resources.corpus(corpus)
        position = docs.positions.get(context_id)
        if position is None:
            raise BadRequest(f"unknown context_id '{context_id}' in corpus {corpus}")
        return Context(context_id=context_id, subset=docs.subsets[position], score=None, text=docs.texts[position])

    def prompt(self, method: Method, corpus: str, question: str, k: int, ranked: list[dict[str, Any]],
               gold: Context | None, seconds: dict[str, float], started: float) -> Prepared:  # fmt: skip
        """The prompt of a question that read `ranked` (ids, subsets, scores) or the `gold` context."""
        row: dict[str, Any] = {"corpus": corpus, "method": method.name, "question": question, "k": k}
        if gold is not None:
            ranked = [{"context_id": gold.context_id, "subset": gold.subset, "score": None}]
            row["gold_context"] = gold.text
        elif method.retrieves:
            row["context_ids"] = [c["context_id"] for c in ranked]
        batch = run_chain(self.prompting, pa.Table.from_pylist([row]))
        texts = batch.column("reader_texts")[0].as_py()
        contexts = [Context(**c, text=text) for c, text in zip(ranked, texts, strict=True)]
        return Prepared(method.name, corpus, batch, contexts, seconds, started, time.perf_counter())

    def record(self, prepared: Prepared, generation: dict[str, Any]) -> dict[str, Any]:
        """`parse_answers` on the prepared row with its generation: the record of the question."""
        batch = with_columns(prepared.batch, {name: pa.array([value]) for name, value in generation.items()})
        return run_chain(self.parsing, batch).to_pylist()[0]


def answer_fields(record: dict[str, Any], generation: dict[str, Any]) -> dict[str, Any]:
    """What a reply says of an answer, from its record: the prediction (None unless finite), its source, the
    formula, the reasoning steps, whether the JSON and the formula held, and the generator's text."""
    prediction = record["prediction"]
    return {
        "prediction": prediction if prediction is not None and math.isfinite(prediction) else None,
        "prediction_source": record["prediction_source"],
        "formula": record["formula"],
        "reasoning_steps": record["reasoning_steps"] or [],
        "json_ok": bool(record["json_ok"]),
        "formula_ok": bool(record["formula_ok"]),
        "raw_output": generation["raw_output"],
    }
