"""One interface for every generation engine: a batch of chat requests in, texts with token counts out."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}


class SamplingParams(BaseModel):
    """Decoding settings; greedy by default so runs are reproducible."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(0.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(512, ge=1)
    seed: int | None = 0
    stop: tuple[str, ...] = ()  # stop generating at any of these strings (not included in the text)
    json_schema: dict | None = None  # constrain the output to this JSON schema where the engine can

    def decoding(self) -> dict[str, Any]:
        """The fields every engine takes under these names: temperature, top_p, max_tokens, and seed and stop when
        set (the JSON schema is each engine's own field)."""
        out: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}
        if self.seed is not None:
            out["seed"] = self.seed
        if self.stop:
            out["stop"] = list(self.stop)
        return out


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to run."""

    messages: tuple[Message, ...]
    params: SamplingParams = field(default_factory=SamplingParams)

    def key(self, engine: str, model: str) -> str:
        """Cache key: engine, model, messages and sampling parameters."""
        params = self.params.model_dump()
        if not params["stop"]:  # keys from before stop strings existed stay valid
            del params["stop"]
        payload = json.dumps(
            {"engine": engine, "model": model, "messages": list(self.messages), "params": params}, sort_keys=True
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def prompt_hash(self) -> str:
        return hashlib.sha256(json.dumps(list(self.messages), sort_keys=True).encode()).hexdigest()[:16]


#: How an engine's error begins when the request itself cannot be run (a prompt longer than the context window,
#: a parameter the engine refuses): retrying will not help, and a server reports it as the client's fault.
REJECTED = "request rejected: "


def rejected(reason: str) -> str:
    """The error text for a request the engine refuses as given."""
    return REJECTED + reason


def is_rejected(error: str | None) -> bool:
    """Whether an engine error says the request itself was refused (see REJECTED)."""
    return error is not None and error.startswith(REJECTED)


@dataclass(frozen=True)
class Generation:
    """A completion with its token counts; `error` is set (and text empty) when the engine failed.
    `finish_reason`: "stop" (the model ended, or a stop string), "length" (cut at `max_tokens`), None if unknown.
    `cached_prompt_tokens`: prompt tokens the engine reused instead of computing (a prefix it had computed before);
    all of them when no engine ran (a disk-cache hit, a repeat of a prompt of the same run); None when the engine
    does not say."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    error: str | None = None
    finish_reason: str | None = None
    cached_prompt_tokens: int | None = None


@dataclass(frozen=True)
class Delta:
    """A piece of a streamed completion: new text as the engine produced it; the last one of a stream carries the
    whole `Generation` (token counts, finish reason, error) instead."""

    text: str = ""
    done: Generation | None = None


class ChunkStream:
    """What a stream of OpenAI chat-completion chunks has said so far: `read` passes each chunk's new text on as
    Deltas and keeps the usage and finish reason; `generation` is the whole completion at the end."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.pieces: list[str] = []
        self.finish: str | None = None
        self.usage: dict = {}

    def read(self, chunk: dict) -> Iterator[Delta]:
        self.usage = chunk.get("usage") or self.usage
        for choice in chunk.get("choices") or []:
            self.finish = choice.get("finish_reason") or self.finish
            text = (choice.get("delta") or {}).get("content") or ""
            if text:
                self.pieces.append(text)
                yield Delta(text)

    def generation(self) -> Generation:
        return Generation(
            text="".join(self.pieces),
            prompt_tokens=int(self.usage.get("prompt_tokens") or 0),
            completion_tokens=int(self.usage.get("completion_tokens") or 0),
            seconds=time.perf_counter() - self.started,
            finish_reason=self.finish,
            cached_prompt_tokens=reported_cached_tokens(self.usage),
        )


def reported_cached_tokens(usage: dict) -> int | None:
    """An OpenAI usage object's `prompt_tokens_details.cached_tokens`, or None where the server reports none."""
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return None if cached is None else int(cached)


class Generator(ABC):
    """Something that turns chat requests into text; an `Engine` (t2rag.generation.engine) builds it."""

    engine: str = "generator"
    #: Whether `generate` may be called from several threads at once (their requests then share the engine).
    concurrent_batches: bool = False

    @property
    @abstractmethod
    def model_id(self) -> str:
        """Identifies the weights (and quantisation) for caching and manifests."""

    @abstractmethod
    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        """Run a batch of requests; one Generation per request, in order. Failures become `error` entries."""

    def stream(self, request: ChatRequest) -> Iterator[Delta]:
        """One request's text as the engine produces it, then its `Generation` (engines that cannot stream yield
        the whole text at once)."""
        (generation,) = self.generate([request])
        if generation.text:
            yield Delta(generation.text)
        yield Delta(done=generation)

    async def astream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        """`stream` for an event loop (a served replica): the engine runs in a worker thread, its pieces handed over
        as they come; engines with an async client of their own override it."""
        async for delta in _in_thread(self.stream(request)):
            yield delta

    def load(self) -> None:  # noqa: B027 - optional hook
        """Load the model now instead of on the first batch (engines that hold weights)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_END = object()


async def _in_thread(items: Iterator[Delta]) -> AsyncIterator[Delta]:
    """A blocking iterator consumed in a worker thread, its items handed to the event loop as they come; when the
    consumer stops early (a client gone), the iterator is closed, so the engine stops and frees its lock."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    stop = threading.Event()

    def pump() -> None:
        try:
            for item in items:
                loop.call_soon_threadsafe(queue.put_nowait, item)
                if stop.is_set():
                    break
        except BaseException as exc:  # handed to the consumer
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            getattr(items, "close", lambda: None)()
            loop.call_soon_threadsafe(queue.put_nowait, _END)

    loop.run_in_executor(None, pump)
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()  # the thread ends at the engine's next piece (a hung engine's thread is not waited for)


def log_batch(engine: str, results: Sequence[Generation], elapsed: float) -> None:
    """One progress line for a batch an engine ran: requests, failures, token rates."""
    prompt = sum(g.prompt_tokens for g in results if g.error is None)
    completion = sum(g.completion_tokens for g in results)
    errors = sum(g.error is not None for g in results)
    rate = 1.0 / elapsed if elapsed > 0 else 0.0
    logging.getLogger(f"t2rag.generation.{engine}").info(
        "%s batch: %d requests (%d failed) in %.1f s, prompt %.0f tok/s, completion %.1f tok/s",
        engine,
        len(results),
        errors,
        elapsed,
        prompt * rate,
        completion * rate,
    )
