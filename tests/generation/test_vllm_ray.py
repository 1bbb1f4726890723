"""The vLLM engine configuration for Ray Data's LLM processor, and (where vLLM is installed: `make test-vllm`) its
validation against the installed vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.config import PRESETS
from t2rag.generation.models import PACKAGED_MODELS
from t2rag.generation.requests import request_from_row, request_row
from t2rag.generation.vllm_ray import (
    make_preprocess,
    model_source,
    postprocess,
    processor_config,
    sampling_dict,
    vllm_engine_kwargs,
)
from t2rag.prompts import ANSWER_SCHEMA, Prompts
from tests.conftest import requires_vllm

ROOT = Path(__file__).resolve().parents[2]


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
@requires_vllm
def test_presets_and_the_paper_config_use_only_options_the_installed_vllm_accepts():
    import dataclasses

    import vllm
    from vllm.engine.arg_utils import EngineArgs
    from vllm.sampling_params import StructuredOutputsParams

    from t2rag.config import load_config

    engine_fields = {f.name for f in dataclasses.fields(EngineArgs)}
    sampling_fields = set(vllm.SamplingParams.__struct_fields__)  # a msgspec struct
    paper = load_config(str(ROOT / "configs/paper_table3.yaml")).generator
    local_model = model_source(PRESETS["vllm-cpu-smollm2"])
    configs = [p for p in PRESETS.values() if p.engine == "vllm" and p.model not in PACKAGED_MODELS]
    for config in [*configs, paper]:
        kwargs = vllm_engine_kwargs(config)
        assert set(kwargs) <= engine_fields, (config.name, set(kwargs) - engine_fields)
        EngineArgs(model=local_model, **kwargs)  # these values too, not only these names (no hub: a local model)
        processor_config(config)  # Ray's own validation of the processor settings
        sampling = sampling_dict(SamplingParams(json_schema=ANSWER_SCHEMA), config.constrained_json)
        structured = sampling.pop("structured_outputs", None)
        assert set(sampling) <= sampling_fields, set(sampling) - sampling_fields
        outputs = StructuredOutputsParams(**structured) if structured else None
        vllm.SamplingParams(**sampling, structured_outputs=outputs)
