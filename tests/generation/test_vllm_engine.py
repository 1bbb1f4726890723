"""The in-process vLLM engine's settings and sampling, and (where vLLM is installed: `make test-vllm`) their
validation against the installed vLLM."""

from __future__ import annotations

import time
from concurrent.futures import wait
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from t2rag.generation.base import SamplingParams
from t2rag.generation.models import PACKAGED_MODELS
from t2rag.generation.registry import PRESETS
from t2rag.generation.vllm_engine import (
    PREFIX_ROUTER,
    EngineFeed,
    VLLMConfig,
    deployment_config,
    in_process_engine_kwargs,
    in_process_env,
    model_source,
    sampling_dict,
    vllm_engine_kwargs,
)
from t2rag.prompts import ANSWER_SCHEMA
from tests.conftest import requires_vllm

ROOT = Path(__file__).resolve().parents[2]


def test_engine_settings_come_from_the_preset_and_the_run():
    cfg = PRESETS["llama-3.3-70b-awq"].model_copy(update={"tensor_parallel_size": 1, "replicas": 6})
    kwargs = vllm_engine_kwargs(cfg)
    assert kwargs["tensor_parallel_size"] == 1 and kwargs["quantization"] == "awq_marlin"
    assert kwargs["enable_prefix_caching"] is True  # all prompts share the system prompt
    assert model_source(cfg) == "casperhansen/llama-3.3-70b-instruct-awq"


def test_a_single_process_engine_keeps_its_worker_in_the_callers_process():
    gpu, cpu = PRESETS["vllm"], PRESETS["vllm-cpu-smollm2"]
    assert "distributed_executor_backend" not in in_process_engine_kwargs(gpu)
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in in_process_env(gpu)  # a GPU engine keeps vLLM's processes
    kwargs = in_process_engine_kwargs(cpu)
    assert kwargs["distributed_executor_backend"] == "uni"
    assert in_process_env(cpu) == {**cpu.engine_env, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert "distributed_executor_backend" not in vllm_engine_kwargs(PRESETS["vllm-cpu-smollm2"])  # Serve LLM's
    with pytest.raises(ValidationError, match="tensor_parallel_size and pipeline_parallel_size must be 1"):
        VLLMConfig(name="x", model="m", single_process=True, tensor_parallel_size=2)


def test_the_prefix_aware_router_follows_prefix_reuse():
    preset = PRESETS["vllm-cpu-smollm2"].model_copy(update={"replicas": 3})
    routed = deployment_config(preset)
    assert routed["request_router_config"] == {"request_router_class": PREFIX_ROUTER}
    assert routed["autoscaling_config"] == {"min_replicas": 3, "max_replicas": 3}
    assert "request_router_config" not in deployment_config(preset.model_copy(update={"prefix_reuse": False}))


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
    single = in_process_engine_kwargs(PRESETS["vllm-cpu-smollm2"])
    assert set(single) <= engine_fields and single["distributed_executor_backend"] in ("uni", "mp", "ray")
    for config in [*configs, paper]:
        kwargs = vllm_engine_kwargs(config)
        assert set(kwargs) <= engine_fields, (config.name, set(kwargs) - engine_fields)
        EngineArgs(model=local_model, **kwargs)  # these values too, not only these names (no hub: a local model)
        sampling = sampling_dict(SamplingParams(json_schema=ANSWER_SCHEMA), config.constrained_json)
        structured = sampling.pop("structured_outputs", None)
        assert set(sampling) <= sampling_fields, set(sampling) - sampling_fields
        outputs = StructuredOutputsParams(**structured) if structured else None
        vllm.SamplingParams(**sampling, structured_outputs=outputs)


class StepEngine:
    """The part of `vllm.LLMEngine` that `EngineFeed` drives: a request's params is the number of steps it takes;
    a prompt of token 0 is refused, and `fail_next` makes the next step raise."""

    def __init__(self):
        self.left: dict[str, int] = {}
        self.running_together = 0  # the most requests one step advanced
        self.fail_next = False
        self.aborted: list[str] = []

    def add_request(self, request_id, prompt, params):
        if prompt["prompt_token_ids"] == [0]:
            raise ValueError("The decoder prompt is longer than the maximum model length")
        self.left[request_id] = params

    def step(self):
        time.sleep(0.01)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("engine core died")
        self.running_together = max(self.running_together, len(self.left))
        for request_id in self.left:
            self.left[request_id] -= 1
        done = [rid for rid, n in self.left.items() if n <= 0]
        for rid in done:
            del self.left[rid]
        return [SimpleNamespace(request_id=rid, finished=True) for rid in done]

    def abort_request(self, request_ids):
        self.aborted += request_ids
        for rid in request_ids:
            self.left.pop(rid, None)


def test_a_batch_joins_the_running_one_instead_of_waiting_for_it():
    engine = StepEngine()
    feed = EngineFeed(engine)
    finished: list[str] = []
    try:
        [long] = feed.submit([([1, 2], 50)])
        long.add_done_callback(lambda _: finished.append("long"))
        while not engine.left:  # the long request is running
            time.sleep(0.001)
        short = feed.submit([([3], 2), ([4], 3)])
        for future in short:
            future.add_done_callback(lambda _: finished.append("short"))
        wait([long, *short], timeout=30)
        assert finished == ["short", "short", "long"]
        assert engine.running_together == 3
    finally:
        feed.close()


def test_a_refused_request_fails_alone_and_a_failed_step_fails_what_is_in_flight():
    engine = StepEngine()
    feed = EngineFeed(engine)
    try:
        refused, fine = feed.submit([([0], 1), ([5], 1)])
        assert isinstance(refused.exception(timeout=30), ValueError)
        assert fine.result(timeout=30).finished
        engine.fail_next = True
        broken = feed.submit([([6], 5), ([7], 5)])
        assert all(isinstance(f.exception(timeout=30), RuntimeError) for f in broken)
        assert len(engine.aborted) == 2
        assert feed.submit([([8], 1)])[0].result(timeout=30).finished  # the feed goes on after a failed step
        assert feed.in_flight() == 0
    finally:
        feed.close()
    with pytest.raises(RuntimeError, match="closed"):
        feed.submit([([9], 1)])[0].result(timeout=30)
