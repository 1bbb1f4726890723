"""The replies of /v1/chat/completions: the whole completion, or its chunks as the generator produces its text.

The reply's content is the answer a person reads (t2rag.answer.readable); the answer's parts are in the `t2rag`
extension (`RagResult`): the first chunk of a stream carries the retrieved contexts, the last the parsed answer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from ray.serve.handle import DeploymentHandle

from serve import openai_api
from serve.answering import Answering, Prepared, answer_fields
from serve.deadlines import UNAVAILABLE, Deadline
from serve.errors import ApiError, error_body, generation_failure, timed_out, unavailable
from t2rag.answer.readable import ReadableAnswer


def rag_result(prepared: Prepared, texts: bool, answer: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `t2rag` extension: the contexts read (their texts when asked), and the answer's fields once known."""
    contexts = [c if texts else c.model_copy(update={"text": None}) for c in prepared.contexts]
    result = openai_api.RagResult(method=prepared.method, corpus=prepared.corpus, contexts=contexts, **(answer or {}))
    return result.model_dump(exclude_none=True)


def completion(
    answering: Answering, prepared: Prepared, generation: dict[str, Any], texts: bool
) -> openai_api.RagCompletion:
    """The whole reply of a generation."""
    record = answering.record(prepared, generation)
    readable = ReadableAnswer()
    content = readable.add(generation["raw_output"]) + readable.finish(record["prediction"], record["formula"])
    rag = rag_result(prepared, texts, answer_fields(record, generation))
    return openai_api.RagCompletion.of(prepared.method, content, generation, t2rag=rag)


async def chunks(
    answering: Answering,
    generator: DeploymentHandle,
    prepared: Prepared,
    body: openai_api.ChatCompletionRequest,
    deadline: Deadline,
) -> AsyncIterator[str]:
    """Chunks as the generator produces its text, then the usage (when asked) and `[DONE]`. A failure after the
    first chunk is an error event."""
    stream = openai_api.ChunkStream(prepared.method)
    yield stream.text("", role=True, t2rag=rag_result(prepared, body.t2rag.with_text))
    readable = ReadableAnswer()
    generation: dict[str, Any] | None = None
    try:
        pieces = generator.options(stream=True).stream.remote(prepared.request)
        async with asyncio.timeout(deadline.left_s()):
            async for piece in pieces:
                if "text" not in piece:
                    generation = piece
                elif text := readable.add(piece["text"]):
                    yield stream.text(text)
    except TimeoutError:
        yield _error_event(timed_out("generator", deadline.budget_s))
        return
    except UNAVAILABLE:
        yield _error_event(unavailable("generator"))
        return
    failure = generation_failure(generation)
    if failure is not None:
        yield _error_event(failure)
        return
    record = answering.record(prepared, generation)
    tail = readable.finish(record["prediction"], record["formula"])
    rag = rag_result(prepared, False, answer_fields(record, generation))
    rag.pop("contexts")
    yield stream.text(tail, openai_api.finish_reason(generation), t2rag=rag)
    if body.stream_options is not None and body.stream_options.include_usage:
        yield stream.usage(generation)
    yield openai_api.DONE


def _error_event(error: ApiError) -> str:
    """An error inside a stream that has begun: OpenAI's error object as an event, then the end of the stream."""
    return f"data: {json.dumps(error_body(error.status, error.message, openai=True))}\n\n{openai_api.DONE}"
