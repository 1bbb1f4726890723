"""vLLM in this process (`vllm.LLM`): the engine is started once, on the first batch (or `load`), and serves every
later batch of the process. The single-process engine holds one; on Ray, each replica of the run's generator
service (ray_jobs.generator_service) holds one, so a run loads the model once per replica, whatever phases
(context summaries, HyDE, answers) generate. Engine settings (tensor parallelism, prefix caching, quantisation) come
from `GeneratorConfig` and are shared with serving (`vllm_engine_kwargs`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from t2rag.generation.base import ChatRequest, Generation, Generator, SamplingParams, rejected
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.models import PACKAGED_MODELS
from t2rag.model_loads import record_load


def vllm_engine_kwargs(config: GeneratorConfig) -> dict[str, Any]:
    """vLLM engine arguments for batch jobs and for serving."""
    kwargs: dict[str, Any] = {
        "tensor_parallel_size": config.tensor_parallel_size,
        "pipeline_parallel_size": config.pipeline_parallel_size,
        "enable_prefix_caching": config.enable_prefix_caching,
        "max_model_len": config.max_model_len,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "dtype": config.dtype,
    }
    if config.quantization:
        kwargs["quantization"] = config.quantization
    if config.enforce_eager:
        kwargs["enforce_eager"] = True
    return kwargs


def model_source(config: GeneratorConfig) -> str:
    """What vLLM loads: a packaged model name becomes its Hugging Face export (made once, then reused)."""
    if config.model in PACKAGED_MODELS:
        from t2rag.generation.hf_export import export_hf, hf_export_dir

        return str(export_hf(config.model, hf_export_dir(config.model)))
    return config.model


def engine_runtime_env(config: GeneratorConfig) -> dict[str, Any] | None:
    """The Ray runtime env of the engine's processes (its `engine_env`), for Ray actors and Serve LLM."""
    return {"env_vars": dict(config.engine_env)} if config.engine_env else None


def sampling_dict(params: SamplingParams, constrained_json: bool) -> dict[str, Any]:
    """vLLM SamplingParams fields for one request (structured output when a schema is set)."""
    out = params.decoding()
    if constrained_json and params.json_schema is not None:
        out["structured_outputs"] = {"json": params.json_schema}
    return out


def vllm_sampling(params: SamplingParams, constrained_json: bool):
    """`vllm.SamplingParams` for one request."""
    import vllm
    from vllm.sampling_params import StructuredOutputsParams

    fields = sampling_dict(params, constrained_json)
    structured = fields.pop("structured_outputs", None)
    return vllm.SamplingParams(
        **fields, structured_outputs=StructuredOutputsParams(**structured) if structured else None
    )


class VLLMGenerator(Generator):
    """The Generator interface over one in-process vLLM engine."""

    engine = "vllm"

    def __init__(self, config: GeneratorConfig):
        self.config = config
        self._llm: Any = None

    @property
    def model_id(self) -> str:
        q = f"@{self.config.quantization}" if self.config.quantization else ""
        return f"{self.config.model}{q}"

    def load(self) -> None:
        if self._llm is None:
            import vllm

            os.environ.update(self.config.engine_env)
            self._llm = vllm.LLM(model=model_source(self.config), **vllm_engine_kwargs(self.config))
            record_load(self.config.model)

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        if not requests:
            return []
        self.load()
        started = time.perf_counter()
        try:
            outputs = self._chat(requests)
        except ValueError as exc:  # a request vLLM refuses as given (too long) fails the whole call
            if len(requests) == 1:
                return [Generation(text="", error=rejected(str(exc).splitlines()[0]))]
            return [g for r in requests for g in self.generate([r])]  # isolate it
        except Exception as exc:  # the engine failed: every request of the batch may succeed on a retry
            return [Generation(text="", error=f"vLLM failed: {type(exc).__name__}: {exc}")] * len(requests)
        seconds = (time.perf_counter() - started) / len(requests)
        return [
            Generation(
                text=o.outputs[0].text,
                prompt_tokens=len(o.prompt_token_ids or []),
                completion_tokens=len(o.outputs[0].token_ids),
                seconds=seconds,
                finish_reason=o.outputs[0].finish_reason,
                cached_prompt_tokens=getattr(o, "num_cached_tokens", None),
            )
            for o in outputs
        ]

    def _chat(self, requests: Sequence[ChatRequest]):
        params = [vllm_sampling(r.params, self.config.constrained_json) for r in requests]
        return self._llm.chat([list(r.messages) for r in requests], params, use_tqdm=False)

    def close(self) -> None:
        self._llm = None
