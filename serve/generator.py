"""The generator deployment: the `generate` stage on the requests that reach a replica together, gathered by
`@serve.batch`. Retrieval runs in the ingress replicas (serve/retrieval.py); the generator is apart because it holds
the GPU or the llama.cpp weights and scales on its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa
from ray import serve

from serve.settings import ServeSettings
from t2rag.config import RunConfig
from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.config import GeneratorConfig, build_generator
from t2rag.generation.requests import GENERATION_COLUMNS, request_row
from t2rag.resources import Resources
from t2rag.stages.generate import Generate

WARM_UP_REQUEST = ChatRequest(({"role": "user", "content": "Hi"},), SamplingParams(max_tokens=1))


@serve.deployment(name="Generator")
class GeneratorDeployment:
    """The `generate` stage over the configured local or HTTP engine; requests that arrive together go in one call."""

    def __init__(self, generator: GeneratorConfig, settings: ServeSettings):
        engine = build_generator(generator, cache=False)
        self.stage = Generate(Resources(RunConfig(generator=generator), generator=engine))
        batch_size = settings.generator_batch_size or (1 if generator.engine == "llamacpp" else generator.concurrency)
        self.generate.set_max_batch_size(batch_size)
        self.generate.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        if generator.engine == "llamacpp":  # load the weights now rather than on the first request
            self.stage(pa.Table.from_pylist([request_row(WARM_UP_REQUEST)]))

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0.005)
    async def generate(self, requests: list[dict[str, str]]) -> list[dict[str, Any]]:
        """Generation columns for each request row (`messages_json`, `params_json`), in order; engine failures
        come back in `generation_error`."""
        out = await asyncio.to_thread(self.stage, pa.Table.from_pylist(requests))
        return out.select(list(GENERATION_COLUMNS)).to_pylist()

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""

    def __del__(self) -> None:
        stage = getattr(self, "stage", None)
        if stage is not None:
            stage.resources.close()
