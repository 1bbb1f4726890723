"""The generator deployment: one request at a time per call, never held behind another request's completion.

Each call runs one request through the engine, `generate` (the whole completion) or `stream` (its text as the
engine produces it). The engines batch by themselves where they can (t2rag.generation.engine). An engine with a
served backend (vLLM: Ray Serve LLM's `LLMServer`) is bound into this application and reached through its handle:
it has no route on the HTTP proxy, so the ingress's guard is the only way in, and the handle works from any node.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle

from t2rag.generation.base import ChatRequest, Delta, Generation
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.registry import engine_of
from t2rag.generation.requests import generation_columns, request_from_row


def as_columns(generation: Generation) -> dict[str, Any]:
    """A generation as one row of the generation columns."""
    return {name: values[0].as_py() for name, values in generation_columns([generation]).items()}


@serve.deployment(name="Generator")
class GeneratorDeployment:
    """The configured generator: built by its engine in this replica, or behind its served backend's handle."""

    def __init__(self, config: GeneratorConfig, backend: DeploymentHandle | None = None):
        engine = engine_of(config)
        if backend is not None:
            self.generator = engine.served_generator(config, backend)
        else:
            self.generator = engine.build(engine.for_serving(config))
            self.generator.load()  # the weights now, not on the first request

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

    def _deltas(self, request: ChatRequest) -> AsyncIterator[Delta]:
        return self.generator.astream(request)

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""

    def __del__(self) -> None:
        generator = getattr(self, "generator", None)
        if generator is not None:
            generator.close()
