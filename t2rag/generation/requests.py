"""Chat requests as Arrow columns, and generations back as columns: the form every engine exchanges.

A request travels as two JSON strings (`messages_json`, `params_json`) so the Arrow schema stays flat and fixed
whatever the messages hold; a generation comes back as the GENERATION_COLUMNS.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from t2rag.generation.base import ChatRequest, Generation, Message, SamplingParams
from t2rag.generation.config import GeneratorConfig

REQUEST_COLUMNS = ("messages_json", "params_json")
REQUEST_TYPES: dict[str, pa.DataType] = {name: pa.string() for name in REQUEST_COLUMNS}

GENERATION_COLUMNS: dict[str, pa.DataType] = {
    "raw_output": pa.string(),
    "prompt_tokens": pa.int32(),
    "completion_tokens": pa.int32(),
    "generation_s": pa.float64(),
    "generation_error": pa.string(),
    "finish_reason": pa.string(),
    "cached_prompt_tokens": pa.int32(),
}


def request_row(request: ChatRequest) -> dict[str, str]:
    """The two request columns of one request."""
    return {"messages_json": json.dumps(list(request.messages)), "params_json": request.params.model_dump_json()}


def request_from_row(row: dict[str, Any]) -> ChatRequest:
    return ChatRequest(tuple(json.loads(row["messages_json"])), SamplingParams.model_validate_json(row["params_json"]))


def request_columns(requests: Sequence[ChatRequest]) -> dict[str, pa.Array]:
    rows = [request_row(r) for r in requests]
    return {name: pa.array([r[name] for r in rows], pa.string()) for name in REQUEST_COLUMNS}


def requests_of(batch: pa.Table) -> list[ChatRequest]:
    return [request_from_row(row) for row in batch.select(list(REQUEST_COLUMNS)).to_pylist()]


def generation_columns(generations: Sequence[Generation]) -> dict[str, pa.Array]:
    values = {
        "raw_output": [g.text for g in generations],
        "prompt_tokens": [g.prompt_tokens for g in generations],
        "completion_tokens": [g.completion_tokens for g in generations],
        "generation_s": [round(g.seconds, 4) for g in generations],
        "generation_error": [g.error for g in generations],
        "finish_reason": [g.finish_reason for g in generations],
        "cached_prompt_tokens": [g.cached_prompt_tokens for g in generations],
    }
    return {name: pa.array(v, GENERATION_COLUMNS[name]) for name, v in values.items()}


def free_text_requests(
    generator: GeneratorConfig, prompts: Sequence[tuple[Message, ...]], max_tokens: int
) -> dict[str, pa.Array]:
    """Request columns asking for unconstrained text (HyDE documents, context summaries) of at most max_tokens."""
    params = generator.sampling.model_copy(update={"max_tokens": max_tokens, "json_schema": None})
    return request_columns([ChatRequest(messages, params) for messages in prompts])
