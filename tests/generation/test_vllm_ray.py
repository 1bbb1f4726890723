"""The vLLM engine configuration for Ray Data's LLM processor (vLLM itself cannot run on this CPU machine)."""

from __future__ import annotations

import importlib.util

import pytest

from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.config import PRESETS
from t2rag.generation.requests import request_from_row, request_row
from t2rag.generation.vllm_ray import make_preprocess, postprocess, processor_config, vllm_engine_kwargs
from t2rag.prompts import ANSWER_SCHEMA, Prompts


def test_processor_config_carries_engine_settings():
    cfg = PRESETS["llama-3.3-70b-awq"].with_overrides(replicas=4, batch_size=48)
    pc = processor_config(cfg)
    assert pc.model_source == "casperhansen/llama-3.3-70b-instruct-awq"
    assert pc.concurrency == 4 and pc.batch_size == 48 and pc.accelerator_type == "H100"
    assert pc.engine_kwargs["tensor_parallel_size"] == 2
    assert pc.engine_kwargs["enable_prefix_caching"] is True  # all prompts share the system prompt
    assert pc.engine_kwargs["quantization"] == "awq_marlin"
    assert pc.should_continue_on_error is True
    assert vllm_engine_kwargs(cfg).items() <= pc.engine_kwargs.items()


def test_prompt_rows_round_trip_through_pre_and_postprocess():
    request = ChatRequest(Prompts().answer("What was revenue?", ["ctx"]), SamplingParams(json_schema=ANSWER_SCHEMA))
    row = {"id": "q1", **request_row(request)}
    assert request_from_row(row) == request  # the same request comes back for the CPU engines
    engine_in = make_preprocess(constrained_json=True)(row)
    assert engine_in["messages"] == list(request.messages)
    assert engine_in["sampling_params"]["structured_outputs"] == {"json": ANSWER_SCHEMA}
    assert engine_in["sampling_params"]["temperature"] == 0.0 and engine_in["sampling_params"]["seed"] == 0
    # What the processor returns: engine columns plus everything we passed through.
    engine_out = {
        **engine_in,
        "generated_text": '{"final_formula": "add(1, 2)"}',
        "num_input_tokens": 812,
        "num_generated_tokens": 17,
        "prompt": "<chat template>",
        "generated_tokens": [1, 2],
    }
    out = postprocess(engine_out)
    assert out["id"] == "q1" and out["raw_output"].startswith("{")
    assert (out["prompt_tokens"], out["completion_tokens"], out["generation_error"]) == (812, 17, None)
    assert "messages" not in out and "generated_tokens" not in out
    unconstrained = make_preprocess(constrained_json=False)(row)["sampling_params"]
    assert "structured_outputs" not in unconstrained


@pytest.mark.vllm
@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (GPU extra; no CPU build here)"
)
def test_real_vllm_generation():  # pragma: no cover - runs only where vLLM is installed
    from t2rag.generation.vllm_ray import VLLMRayGenerator

    gen = VLLMRayGenerator(PRESETS["vllm"].with_overrides(model="Qwen/Qwen2.5-0.5B-Instruct", max_model_len=4096))
    out = gen.generate([ChatRequest(({"role": "user", "content": "Say hi"},), SamplingParams(max_tokens=8))])
    assert out[0].text and out[0].completion_tokens > 0
