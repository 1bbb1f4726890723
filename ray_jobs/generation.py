"""Generation over a Ray dataset of prompt rows (`messages_json`, `params_json`): vLLM's processor on GPU
clusters, an actor pool of the llama.cpp or HTTP engine elsewhere. Output columns: raw_output, prompt_tokens,
completion_tokens, generation_s, generation_error; all input columns pass through."""

from __future__ import annotations

from ray_jobs.common import config_kwargs
from ray_jobs.stages import LocalGenerate
from t2rag.config import RunConfig
from t2rag.errors import ConfigError


def generate_dataset(ds, config: RunConfig):
    """Attach generations to every row of `ds`."""
    import ray

    generator = config.generator
    if generator is None:
        raise ConfigError("this job generates text but the config names no generator")
    if generator.engine == "vllm":
        from t2rag.generation.vllm_ray import build_vllm_processor

        return build_vllm_processor(generator)(ds)
    r = config.ray
    return ds.map_batches(
        LocalGenerate,
        fn_constructor_kwargs=config_kwargs(config),
        compute=ray.data.ActorPoolStrategy(size=r.generate_actors),
        batch_size=r.generate_batch_size,
        batch_format="pyarrow",
    )
