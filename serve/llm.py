"""vLLM behind Ray Serve LLM's OpenAI-compatible application.

Deploy `serve.llm:build_llm_app` as its own application (route `/llm`, see serve/config.yaml) and give the t2rag
application `llm_base_url: http://127.0.0.1:8000/llm/v1` (`t2rag serve` does both); its Generator deployment then
sends chat completions there with the generator's sampling settings and answer schema. Engine settings (tensor
parallelism, quantisation, prefix caching, context length) are the batch job's, from `vllm_engine_kwargs`.
`ray.serve.llm` imports only where vLLM is installed: the GPU extra, or the CPU build of `make vllm`.
"""

from __future__ import annotations

from typing import Any

from ray.serve.deployment import Application

from t2rag.errors import ConfigError
from t2rag.generation.config import GeneratorConfig, resolve_generator
from t2rag.generation.vllm_engine import engine_runtime_env, model_source, vllm_engine_kwargs

LLM_ROUTE = "/llm"


def llm_config(generator: GeneratorConfig) -> Any:
    """Ray Serve LLM's `LLMConfig` for a vLLM generator config."""
    try:
        from ray.serve.llm import LLMConfig
    except ImportError as exc:
        raise ConfigError(
            "serving a vllm generator needs Ray Serve LLM, which imports only with vllm installed "
            "(pip install 't2rag[gpu]')"
        ) from exc
    return LLMConfig(
        model_loading_config={"model_id": generator.model, "model_source": model_source(generator)},
        runtime_env=engine_runtime_env(generator),
        engine_kwargs=vllm_engine_kwargs(generator),
        deployment_config={
            "autoscaling_config": {"min_replicas": generator.replicas, "max_replicas": generator.replicas}
        },
        accelerator_type=generator.accelerator_type,
        # vLLM's CPU platform refuses Ray workers; Serve LLM uses its multiprocessing executor for a CPU config.
        accelerator_config={"kind": "cpu"} if generator.device == "cpu" else None,
    )


def build_llm_app(args: dict[str, Any] | None = None) -> Application:
    """App builder: `import_path: serve.llm:build_llm_app`, args `{generator: <vllm preset or mapping>}`."""
    generator = resolve_generator((args or {}).get("generator", "vllm"))
    if generator is None or generator.engine != "vllm":
        raise ConfigError("serve.llm:build_llm_app serves vllm generators only")
    config = llm_config(generator)
    from ray.serve.llm import build_openai_app

    return build_openai_app({"llm_configs": [config]})


def openai_client_config(generator: GeneratorConfig, base_url: str) -> GeneratorConfig:
    """The same generator, reached as an OpenAI-compatible server at `base_url` (the LLM app's /v1 route)."""
    return generator.model_copy(update={"engine": "openai", "base_url": base_url, "json_mode": "json_schema"})
