"""The OpenAI-shaped routes of the served RAG (/v1/chat/completions, /v1/models, /generate): their request and
response models, and the pieces of a stream.

A served method is a model (`model: "bm25_meta"`). The last message is the question (it must be the user's);
earlier user and assistant turns go into the prompt as the conversation, and the client's system messages are added
to the answer's system prompt. The reply's `content` is the answer a person reads (t2rag.answer.readable); the
machine-readable parts (prediction, formula, contexts with their ids, subsets and scores, texts on request) are in
the `t2rag` extension field, which OpenAI clients ignore. Parameters are honoured (`temperature`, `top_p`,
`max_tokens` / `max_completion_tokens`, `stop`, `seed`, `stream`, `stream_options.include_usage`) or refused with
a 400 naming them (`n` other than 1, a `response_format` other than text, anything unknown).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from serve.schemas import (
    MAX_GENERATE_TOKENS,
    MAX_K,
    MAX_MESSAGES,
    MAX_QUESTION_CHARS,
    Context,
    StrictRequest,
    Usage,
)

#: Extension fields live under this key, in requests and replies.
EXTENSION = "t2rag"
MAX_STOP = 4
MAX_MESSAGE_CHARS = 8_000


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    role: Literal["system", "user", "assistant"] = Field(description="who wrote the message")
    content: str = Field(description="the message text")


class GenerateRequest(StrictRequest):
    """An OpenAI-style chat completion request (`model`, if given, is ignored: the app serves one model)."""

    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES, description="the conversation so far")
    max_tokens: int = Field(256, ge=1, le=MAX_GENERATE_TOKENS, description="the most tokens to generate")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="sampling temperature; 0 is greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling mass")
    model: str | None = Field(None, max_length=256, description="accepted for OpenAI clients and ignored")


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["text"]
    text: str


class ChatMessageIn(BaseModel):
    """A message as OpenAI clients send it: text content, or a list of text parts."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]
    name: str | None = None

    @property
    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool = False


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class RagOptions(StrictRequest):
    """The `t2rag` extension of a request (`extra_body={"t2rag": {...}}` with the official client)."""

    corpus: str | None = Field(
        None, description="the corpus searched: a subset's name or `pooled`; default: the only one loaded, else pooled"
    )
    k: int | None = Field(
        None, ge=1, le=MAX_K, description="contexts the generator reads; default: the served run config's retrieval.k"
    )
    context_id: str | None = Field(None, max_length=512, description="the gold context: needed by model `oracle`")
    with_text: bool = Field(False, description="return the contexts' texts in the reply's extension")


class ChatCompletionRequest(BaseModel):
    """POST /v1/chat/completions."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(description="a served method (GET /v1/models), e.g. bm25_meta; `oracle` with a context_id")
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1, le=MAX_GENERATE_TOKENS)
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_GENERATE_TOKENS)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int | None = None
    response_format: ResponseFormat | None = None
    user: str | None = Field(None, max_length=256, description="an end-user id, for the client's own records")
    t2rag: RagOptions = Field(default_factory=RagOptions)

    @field_validator("messages")
    @classmethod
    def _sizes(cls, messages: list[ChatMessageIn]) -> list[ChatMessageIn]:
        for m in messages:
            if len(m.text) > MAX_MESSAGE_CHARS:
                raise ValueError(f"a message is longer than {MAX_MESSAGE_CHARS:,} characters")
        return messages

    def unsupported(self) -> tuple[str, str] | None:
        """(parameter, reason) for a parameter this API cannot honour, else None."""
        if self.n not in (None, 1):
            return "n", "only n=1 is supported: one answer per request"
        if self.response_format is not None and self.response_format.type != "text":
            return "response_format", "the reply is the answer as text (its parts are in the `t2rag` field)"
        if isinstance(self.stop, list) and len(self.stop) > MAX_STOP:
            return "stop", f"at most {MAX_STOP} stop sequences"
        return None

    def question(self) -> str:
        """The last message, which must be the user's: the question to answer."""
        last = self.messages[-1]
        if last.role != "user":
            raise ValueError("the last message must be the user's question")
        text = last.text.strip()
        if not text or len(text) > MAX_QUESTION_CHARS:
            raise ValueError(f"the question must have 1 to {MAX_QUESTION_CHARS:,} characters")
        return text

    def conversation(self) -> tuple[str, list[dict[str, str]]]:
        """The client's system text, and the earlier user and assistant turns, in order."""
        system = "\n\n".join(m.text for m in self.messages[:-1] if m.role in ("system", "developer"))
        turns = [{"role": m.role, "content": m.text} for m in self.messages[:-1] if m.role in ("user", "assistant")]
        return system, turns

    def stops(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


def with_conversation(messages: list[dict[str, str]], system: str, turns: list[dict[str, str]]) -> list[dict]:
    """The answer prompt's messages with the client's system text appended to its system message and the earlier
    turns before its user message."""
    first, *rest = messages
    if first["role"] == "system":
        head = [{**first, "content": f"{first['content']}\n\n{system}" if system else first["content"]}]
    else:
        head, rest = ([{"role": "system", "content": system}] if system else []), messages
    return [*head, *turns, *rest]


class RagResult(BaseModel):
    """The `t2rag` extension of a reply: what a program reads instead of the prose."""

    method: str
    corpus: str = Field(description="the corpus searched: a subset's name, or `pooled`")
    contexts: list[Context] = Field(description="the contexts the generator read, in prompt order")
    prediction: float | None = None
    prediction_source: str | None = None
    formula: str | None = None
    reasoning_steps: list[str] | None = None
    json_ok: bool | None = None
    formula_ok: bool | None = None
    raw_output: str | None = None


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def finish_reason(generation: dict[str, Any]) -> FinishReason:
    return "length" if generation.get("finish_reason") == "length" else "stop"


FinishReason = Literal["stop", "length"]


class ChatChoice(BaseModel):
    index: int = Field(0, description="always 0: one choice per request")
    message: ChatMessage = Field(description="the assistant's reply")
    finish_reason: FinishReason = Field(description="`length` when the reply was cut at `max_tokens`, else `stop`")
    logprobs: None = None


class _Reply(BaseModel):
    """What every completion and chunk begins with."""

    id: str = Field(default_factory=completion_id, description="a unique id for this completion")
    created: int = Field(default_factory=lambda: int(time.time()), description="Unix time of the completion")
    model: str = Field(description="the model that generated the reply (a served method, or the generator's model)")

    def dumped(self) -> dict[str, Any]:
        """The JSON object: fields that are None at the top level (usage, the extension) left out."""
        return self.model_dump(exclude={name for name in ("usage", EXTENSION) if getattr(self, name, 0) is None})


class ChatCompletion(_Reply):
    """A `chat.completion` object, as /generate and /v1/chat/completions return it."""

    object: Literal["chat.completion"] = "chat.completion"
    choices: list[ChatChoice] = Field(description="the reply")
    usage: Usage = Field(description="token counts")

    @classmethod
    def of(cls, model: str, content: str, generation: dict[str, Any], **fields: Any) -> Any:
        """The completion of one generation (its generation columns) whose reply text is `content`."""
        choice = ChatChoice(
            message=ChatMessage(role="assistant", content=content), finish_reason=finish_reason(generation)
        )
        return cls(model=model, choices=[choice], usage=Usage.of(generation), **fields)


class GenerateResponse(ChatCompletion):
    """POST /generate's reply: the completion, its text and the generator's time."""

    text: str = Field(description="the reply text (the same as choices[0].message.content)")
    generation_s: float = Field(description="seconds spent waiting for the generator")


class RagCompletion(ChatCompletion):
    """POST /v1/chat/completions' reply: the completion with the answer's parts in the extension."""

    t2rag: dict[str, Any] = Field(description="the RagResult: contexts, prediction, formula, ...")


class ChunkDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(_Reply):
    """One `chat.completion.chunk` of a stream."""

    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    choices: list[ChunkChoice]
    usage: Usage | None = None
    t2rag: dict[str, Any] | None = None

    def event(self) -> str:
        """The chunk as a server-sent event."""
        body = self.dumped()
        for choice in body["choices"]:
            choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
        return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


class ChunkStream:
    """The chunks of one streamed completion: one id and model for all of them."""

    def __init__(self, model: str):
        self.id, self.model = completion_id(), model

    def text(self, content: str, finish: FinishReason | None = None, role: bool = False, **extra: Any) -> str:
        delta = ChunkDelta(role="assistant" if role else None, content=content)
        choice = ChunkChoice(delta=delta, finish_reason=finish)
        return ChatCompletionChunk(id=self.id, model=self.model, choices=[choice], **extra).event()

    def usage(self, generation: dict[str, Any]) -> str:
        """The chunk with no choices and the usage, sent last when `stream_options.include_usage` is set."""
        return ChatCompletionChunk(id=self.id, model=self.model, choices=[], usage=Usage.of(generation)).event()


DONE = "data: [DONE]\n\n"


class ModelCard(BaseModel):
    """A served method, as OpenAI's model object."""

    id: str = Field(description="the method's name, passed as `model`")
    object: Literal["model"] = "model"
    created: int = Field(description="when the app started (Unix seconds)")
    owned_by: str = "t2rag"


class ModelList(BaseModel):
    """GET /v1/models' reply: every method a chat completion can name."""

    object: Literal["list"] = "list"
    data: list[ModelCard]


def model_list(names: list[str], created: int) -> ModelList:
    return ModelList(data=[ModelCard(id=n, created=created) for n in names])
