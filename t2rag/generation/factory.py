"""Builds a generator engine from its settings: the one module that knows every engine, above both the settings
and the engines (each engine imports its settings, never the other engines)."""

from __future__ import annotations

from t2rag.generation.base import Generator
from t2rag.generation.config import GeneratorConfig


def build_generator(config: GeneratorConfig, cache: bool = True) -> Generator:
    """Instantiate the engine; with `cache` its results go through the disk cache."""
    if config.engine == "llamacpp":
        from t2rag.generation.llamacpp import LlamaCppGenerator

        engine: Generator = LlamaCppGenerator(config)
    elif config.engine == "openai":
        from t2rag.generation.openai_http import OpenAIHTTPGenerator

        engine = OpenAIHTTPGenerator(config)
    else:
        from t2rag.generation.vllm_engine import VLLMGenerator

        engine = VLLMGenerator(config)
    if not cache:
        return engine
    from t2rag.generation.cache import CachedGenerator

    return CachedGenerator(engine)
