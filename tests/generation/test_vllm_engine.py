"""The in-process vLLM engine's settings and sampling, and (where vLLM is installed: `make test-vllm`) their
validation against the installed vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2rag.generation.base import SamplingParams
from t2rag.generation.config import PRESETS
from t2rag.generation.models import PACKAGED_MODELS
from t2rag.generation.vllm_engine import model_source, sampling_dict, vllm_engine_kwargs
from t2rag.prompts import ANSWER_SCHEMA
from tests.conftest import requires_vllm

ROOT = Path(__file__).resolve().parents[2]


def test_engine_settings_come_from_the_preset_and_the_run():
    cfg = PRESETS["llama-3.3-70b-awq"].model_copy(update={"tensor_parallel_size": 1, "replicas": 6})
    kwargs = vllm_engine_kwargs(cfg)
    assert kwargs["tensor_parallel_size"] == 1 and kwargs["quantization"] == "awq_marlin"
    assert kwargs["enable_prefix_caching"] is True  # all prompts share the system prompt
    assert model_source(cfg) == "casperhansen/llama-3.3-70b-instruct-awq"


def test_sampling_constrains_json_only_where_asked():
    params = SamplingParams(json_schema=ANSWER_SCHEMA)
    constrained = sampling_dict(params, constrained_json=True)
    assert constrained["structured_outputs"] == {"json": ANSWER_SCHEMA}
    assert constrained["temperature"] == 0.0 and constrained["seed"] == 0
    assert "structured_outputs" not in sampling_dict(params, constrained_json=False)


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
        sampling = sampling_dict(SamplingParams(json_schema=ANSWER_SCHEMA), config.constrained_json)
        structured = sampling.pop("structured_outputs", None)
        assert set(sampling) <= sampling_fields, set(sampling) - sampling_fields
        outputs = StructuredOutputsParams(**structured) if structured else None
        vllm.SamplingParams(**sampling, structured_outputs=outputs)
