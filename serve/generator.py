"""The generator deployment: one request at a time per call, never held behind another request's completion.

Each call runs one request through the engine, `generate` (the whole completion) or `stream` (its text as the
engine produces it). The engines batch by themselves where they can: vLLM batches continuously, the HTTP engine
sends concurrent requests, llama.cpp runs one request at a time whatever the batch. A vLLM generator is Ray Serve
LLM's `LLMServer` deployment bound into this application (serve/llm.py) and reached through its handle: it has no
route on the HTTP proxy, so the ingress's guard is the only way in, and the handle works from any node.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle

from serve.settings import ServeSettings
from t2rag.generation.base import ChatRequest, Delta, Generation, SamplingParams
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.factory import build_generator
from t2rag.generation.requests import generation_columns, request_from_row

WARM_UP_REQUEST = ChatRequest(({"role": "user", "content": "Hi"},), SamplingParams(max_tokens=1))
_END = object()


def as_columns(generation: Generation) -> dict[str, Any]:
    """A generation as one row of the generation columns."""
    return {name: values[0].as_py() for name, values in generation_columns([generation]).items()}


@serve.deployment(name="Generator")
class GeneratorDeployment:
    """The configured engine: in this replica (llama.cpp, an HTTP client), or vLLM behind Serve LLM's handle."""

    def __init__(self, generator: GeneratorConfig, settings: ServeSettings, llm: DeploymentHandle | None = None):
        if llm is not None:
            from serve.llm import ServeLLMEngine

            self.engine: Any = ServeLLMEngine(llm, generator)
        else:
            # A served answer must not depend on the requests before it.
            generator = generator.model_copy(update={"prompt_cache": False})
            self.engine = build_generator(generator, cache=False)
            self.engine.load()  # the weights now, not on the first request

    async def generate(self, request: dict[str, str]) -> dict[str, Any]:
        """The generation columns of one request row (`messages_json`, `params_json`); engine failures come back
        in `generation_error`."""
        done = Generation(text="", error="the engine ended without a result")
        async for delta in self._deltas(request_from_row(request)):
            done = delta.done or done
        return as_columns(done)

    async def stream(self, request: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """One request's text as the engine produces it: `{"text": ...}` pieces, then the generation columns."""
        async for delta in self._deltas(request_from_row(request)):
            yield {"text": delta.text} if delta.done is None else as_columns(delta.done)

    async def _deltas(self, request: ChatRequest) -> AsyncIterator[Delta]:
        if hasattr(self.engine, "astream"):
            async for delta in self.engine.astream(request):
                yield delta
            return
        async for delta in _in_thread(self.engine.stream(request)):
            yield delta

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""

    def __del__(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None and hasattr(engine, "close"):
            engine.close()


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
