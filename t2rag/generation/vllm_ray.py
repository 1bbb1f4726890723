"""vLLM through Ray Data's LLM processor: the production engine on GPU clusters.

`build_vllm_processor` returns a processor that ray_jobs applies to a streaming dataset of request rows (columns
`messages_json` and `params_json`, see t2rag.generation.requests; anything else passes through);
`VLLMRayGenerator` wraps the same processor behind the one-batch `Generator` interface for the single-process
engine. Engine settings (tensor parallelism, replicas, prefix caching, quantisation) come from `GeneratorConfig` and
are shared with serving (`vllm_engine_kwargs`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from t2rag.generation.base import ChatRequest, Generation, Generator, SamplingParams
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.models import PACKAGED_MODELS
from t2rag.generation.requests import request_row


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
    """The Ray runtime env of the engine's processes (its `engine_env`), for the batch processor and Serve LLM."""
    return {"env_vars": dict(config.engine_env)} if config.engine_env else None


def processor_config(config: GeneratorConfig):
    """The `vLLMEngineProcessorConfig` for a generator config."""
    from ray.data.llm import vLLMEngineProcessorConfig

    return vLLMEngineProcessorConfig(
        model_source=model_source(config),
        engine_kwargs=vllm_engine_kwargs(config),
        runtime_env=engine_runtime_env(config),
        concurrency=config.replicas,
        batch_size=config.batch_size,
        accelerator_type=config.accelerator_type,
        should_continue_on_error=True,  # one bad prompt must not fail a 32K-question job
    )


def sampling_dict(params: SamplingParams, constrained_json: bool) -> dict[str, Any]:
    """vLLM SamplingParams fields for one request (structured output when a schema is set)."""
    out: dict[str, Any] = {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
    }
    if params.seed is not None:
        out["seed"] = params.seed
    if constrained_json and params.json_schema is not None:
        out["structured_outputs"] = {"json": params.json_schema}
    return out


def make_preprocess(constrained_json: bool):
    """Prompt row -> the processor's input (`messages`, `sampling_params`); other columns pass through."""

    def preprocess(row: dict[str, Any]) -> dict[str, Any]:
        params = SamplingParams.model_validate_json(row["params_json"])
        return {
            **row,
            "messages": json.loads(row["messages_json"]),
            "sampling_params": sampling_dict(params, constrained_json),
        }

    return preprocess


def postprocess(row: dict[str, Any]) -> dict[str, Any]:
    """Processor output -> the generations columns, keeping the caller's pass-through columns."""
    error = row.get("__inference_error__")
    keep = {k: v for k, v in row.items() if not k.startswith("__") and k not in _ENGINE_COLUMNS}
    keep.update(
        raw_output=row.get("generated_text") or "",
        prompt_tokens=int(row.get("num_input_tokens") or 0),
        completion_tokens=int(row.get("num_generated_tokens") or 0),
        generation_error=str(error) if error else None,
    )
    return keep


_ENGINE_COLUMNS = {
    "messages",
    "sampling_params",
    "prompt",
    "prompt_token_ids",
    "generated_tokens",
    "generated_text",
    "num_input_tokens",
    "num_generated_tokens",
    "metrics",
    "request_id",
    "batch_uuid",
    "time_taken_llm",
    "params",
    "embeddings",
    "generated_logprobs",
    "prompt_logprobs",
    "tokenized_prompt",
}


def build_vllm_processor(config: GeneratorConfig):
    """A Ray Data processor: dataset of prompt rows -> dataset with generations columns."""
    from ray.data.llm import build_processor

    return build_processor(
        processor_config(config), preprocess=make_preprocess(config.constrained_json), postprocess=postprocess
    )


class VLLMRayGenerator(Generator):
    """The Generator interface over the Ray Data vLLM processor (starts Ray if needed)."""

    engine = "vllm"

    def __init__(self, config: GeneratorConfig):
        self.config = config
        self._processor = None

    @property
    def model_id(self) -> str:
        q = f"@{self.config.quantization}" if self.config.quantization else ""
        return f"{self.config.model}{q}"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        import ray

        if not requests:
            return []
        if not ray.is_initialized():
            ray.init(ignore_reinit_error=True, include_dashboard=False)
        if self._processor is None:
            self._processor = build_vllm_processor(self.config)
        rows = [{"request_index": i, **request_row(r)} for i, r in enumerate(requests)]
        start = time.perf_counter()
        out = self._processor(ray.data.from_items(rows, override_num_blocks=max(1, len(rows) // 64))).take_all()
        seconds = (time.perf_counter() - start) / len(rows)
        by_index = {int(r["request_index"]): r for r in out}
        return [
            Generation(
                text=by_index[i]["raw_output"],
                prompt_tokens=by_index[i]["prompt_tokens"],
                completion_tokens=by_index[i]["completion_tokens"],
                seconds=seconds,
                error=by_index[i]["generation_error"],
            )
            if i in by_index
            else Generation(text="", error="no output from the vLLM processor")
            for i in range(len(requests))
        ]
