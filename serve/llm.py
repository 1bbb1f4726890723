"""vLLM served by Ray Serve LLM, inside the t2rag application.

`llm_deployment` is Serve LLM's `LLMServer` deployment for a vLLM generator; `serve.app.compose` binds it into the
t2rag application as a child of the Generator deployment, so it has no route of its own on the HTTP proxy (every
request goes through the ingress and its API key) and is reached through a deployment handle, which works from a
replica on any node. `ServeLLMEngine` is the engine the Generator deployment runs over that handle: chat requests
streamed back as the engine produces them; with `generator.prefix_reuse`, Serve LLM's prefix-aware router picks the
replica for each request. Engine settings (tensor parallelism, quantisation, prefix caching,
context length) are the batch job's, from `vllm_engine_kwargs`. `ray.serve.llm` imports only where vLLM is
installed: the GPU extra, or the CPU build of `make vllm`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from ray.serve.deployment import Application
from ray.serve.handle import DeploymentHandle

from t2rag.errors import ConfigError
from t2rag.generation.base import ChatRequest, ChunkStream, Delta, Generation, rejected
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.vllm_engine import engine_runtime_env, model_source, sampling_dict, vllm_engine_kwargs

#: Ray Serve LLM's request router that sends a prompt to the replica holding most of its prefix.
PREFIX_ROUTER = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"


def llm_config(generator: GeneratorConfig) -> Any:
    """Ray Serve LLM's `LLMConfig` for a vLLM generator config."""
    try:
        from ray.serve.llm import LLMConfig
    except ImportError as exc:
        raise ConfigError(
            "serving a vllm generator needs Ray Serve LLM, which imports only with vllm installed "
            "(pip install 't2rag[gpu]')"
        ) from exc
    deployment: dict[str, Any] = {
        "autoscaling_config": {"min_replicas": generator.replicas, "max_replicas": generator.replicas}
    }
    if generator.prefix_reuse:  # online requests one at a time: Serve LLM's prefix-aware router (see the README)
        deployment["request_router_config"] = {"request_router_class": PREFIX_ROUTER}
    return LLMConfig(
        model_loading_config={"model_id": generator.model, "model_source": model_source(generator)},
        runtime_env=engine_runtime_env(generator),
        engine_kwargs=vllm_engine_kwargs(generator),
        deployment_config=deployment,
        accelerator_type=generator.accelerator_type,
        # vLLM's CPU platform refuses Ray workers; Serve LLM uses its multiprocessing executor for a CPU config.
        accelerator_config={"kind": "cpu"} if generator.device == "cpu" else None,
    )


def llm_deployment(generator: GeneratorConfig) -> Application:
    """Serve LLM's engine deployment for `generator`, to bind into an application (it adds no HTTP route)."""
    config = llm_config(generator)  # first: without vllm, a ConfigError naming the fix
    from ray.serve.llm import build_llm_deployment

    return build_llm_deployment(config)


class ServeLLMEngine:
    """Chat completions through the `LLMServer` handle, streamed (the only path: a whole completion is its stream
    joined)."""

    def __init__(self, handle: DeploymentHandle, generator: GeneratorConfig):
        self.handle = handle.options(stream=True)
        self.generator = generator

    async def astream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        from ray.serve.llm.openai_api_models import ChatCompletionRequest

        sampling = sampling_dict(request.params, self.generator.constrained_json)
        structured = sampling.pop("structured_outputs", None)
        body: dict[str, Any] = {
            "model": self.generator.model,
            "messages": list(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            **sampling,
        }
        if structured:
            schema = {"name": "answer", "schema": structured["json"]}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        stream = ChunkStream()
        async for batch in self.handle.chat.remote(ChatCompletionRequest(**body)):
            for item in batch if isinstance(batch, list) else [batch]:
                event = _event(item)
                if "error" in event:
                    error = event["error"]
                    message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
                    code = error.get("code") if isinstance(error, dict) else None
                    failed = rejected(message) if code in (400, 413, 422) else f"vLLM failed: {message}"
                    yield Delta(done=Generation(text="", error=failed))
                    return
                for delta in stream.read(event):
                    yield delta
        yield Delta(done=stream.generation())


def _event(item: Any) -> dict[str, Any]:
    """One streamed item as a dict: an SSE string (`data: {...}`), or a response or error object."""
    if isinstance(item, str):
        data = item.strip().removeprefix("data:").strip()
        return {} if not data or data == "[DONE]" else json.loads(data)
    if hasattr(item, "model_dump"):
        dumped = item.model_dump()
        return {"error": dumped} if type(item).__name__ == "ErrorResponse" else dumped
    return dict(item)
