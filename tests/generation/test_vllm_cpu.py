"""vLLM for real, on its CPU build (`make test-vllm`): the run's generator service drives the in-process engine end
to end on Ray, loading it once per run, and its records equal what the same model returns through `vllm serve`
with the project's `openai` generator; the single-process runner loads it once for every phase of a run.

The model is the packaged SmolLM2-135M-Instruct exported to Hugging Face format (t2rag.generation.hf_export).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import free_port, real_table, requires_vllm, write_layout
from tests.generation.vllm_runs import MAX_TOKENS, METHODS, evaluate, records, run_config

pytestmark = [pytest.mark.vllm, pytest.mark.slow, requires_vllm]

PRESET = "vllm-cpu-smollm2"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    """60 questions of each subset: enough for a seeded sample and a small dense index."""
    tables = {name: real_table(name).slice(0, 60) for name in ("FinQA", "TAT-DQA")}
    return str(write_layout(tmp_path_factory.mktemp("vllm-data"), tables))


#: SmolLM2's own answers to these questions read no number within the test's few tokens, which would let the two
#: paths' predictions agree by both being empty: the answer prompt asks it to copy an answer that holds one.
COPIED_ANSWER = '{"reasoning_steps":[],"final_formula":"add(2, 3)","computed_formula":"5"}'


@pytest.fixture(scope="module")
def number_prompt(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("prompts") / "answer_system.md"
    path.write_text(f"Reply with exactly this JSON object and nothing else: {COPIED_ANSWER}")
    return str(path)


@pytest.fixture(scope="module")
def ray_run(data_dir, tmp_path_factory, number_prompt) -> Path:
    """`t2rag eval --runner ray` with the vLLM generator, as a user runs it."""
    out = tmp_path_factory.mktemp("ray") / "run"
    result = evaluate(run_config(data_dir, out, {"preset": PRESET}, "ray", number_prompt))
    assert set(result["methods"]) == set(METHODS)
    return out


def test_the_generator_service_answers_every_sampled_question_with_one_engine(ray_run):
    got = records(ray_run)
    assert len(got) == len(METHODS) * 4  # 2 questions per subset and method
    for row in got.values():
        assert row["generation_error"] is None, row["generation_error"]
        assert row["raw_output"] and 0 < row["completion_tokens"] <= MAX_TOKENS and row["prompt_tokens"] > 40
    result = json.loads((ray_run / "result.json").read_text())
    assert result["methods"]["base"]["weighted"]["questions"] == 120  # retrieval over every question
    assert result["model_loads"]["smollm2-135m"] == 1


@pytest.fixture(scope="module")
def vllm_server():
    """`vllm serve` on the same export, the OpenAI-compatible server a user would start."""
    from t2rag.generation.registry import PRESETS
    from t2rag.generation.vllm_engine import model_source

    preset = PRESETS[PRESET]
    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_source(preset)]
    command += ["--served-model-name", "smollm2", "--port", str(port), "--host", "127.0.0.1"]
    command += ["--dtype", preset.dtype, "--max-model-len", str(preset.max_model_len), "--enforce-eager"]
    command += ["--no-enable-prefix-caching"]
    log = open(Path(model_source(preset)).parent / "vllm-serve.log", "w")  # noqa: SIM115 - closed below
    env = {**os.environ, **preset.engine_env}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, Path(log.name).read_text()[-3000:]
            assert time.monotonic() < deadline, "vllm serve did not come up in 300 s"
            time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


def _same_number(a: float | None, b: float | None) -> bool:
    """Equal predictions, or no number read in either (NaN or null): never one of them alone."""
    unread = [x is None or math.isnan(x) for x in (a, b)]
    return all(unread) if any(unread) else a == b


def test_records_equal_those_through_vllm_serve(ray_run, vllm_server, data_dir, tmp_path, number_prompt):
    out = tmp_path / "http"
    generator = {"engine": "openai", "model": "smollm2", "base_url": vllm_server, "json_mode": "json_schema"}
    evaluate(run_config(data_dir, out, generator, "local", number_prompt))
    batch, served = records(ray_run), records(out)
    assert set(batch) == set(served)
    numbers = [row["prediction"] for row in batch.values() if not _same_number(row["prediction"], None)]
    assert numbers, "no prediction holds a number: the comparison below could not fail"
    for key, row in batch.items():
        assert row["raw_output"] == served[key]["raw_output"], key
        assert _same_number(row["prediction"], served[key]["prediction"]), key


def test_one_engine_for_every_phase_of_a_single_process_run(tiny_data, tmp_path, short_system_prompt):
    """Context summaries, HyDE's documents, crag's grades and the answers of six methods on the single-process
    runner: vLLM is started once (it used to start a processor, and so an engine, for every block of 8 prompts);
    crag grades and answers every sampled question on it."""
    out = tmp_path / "run"
    config = run_config(tiny_data, out, {"preset": PRESET}, "local", short_system_prompt)
    fields = yaml.safe_load(config.read_text())
    fields.update(methods=["pretrained_only", "oracle", "base", "hyde", "sumcontext", "crag"], limit=1)
    fields["prompts"].update(hyde_max_tokens=24, summary_max_tokens=24, grade_max_tokens=16)
    fields["retrieval"]["index_uri"] = str(tmp_path / "lancedb")
    config.write_text(yaml.safe_dump(fields))
    result = evaluate(config)
    assert result["model_loads"]["smollm2-135m"] == 1
    assert set(result["methods"]) == set(fields["methods"])
    crag = [r for r in records(out).values() if r["method"] == "crag"]
    assert len(crag) == 2 and all(r["context_ids"] and r["raw_output"] and r["generation_error"] is None for r in crag)


def test_prompts_sharing_a_context_reuse_it_in_vllms_prefix_cache(tmp_path, monkeypatch):
    """The oracle over every question of two FinQA dev contexts with several questions, on the single-process
    engine with prefix caching on and a fresh generation cache: the reused share is vLLM's own count
    (`num_cached_tokens`), every answer computed by the engine."""
    from bench.prefix_reuse import shared_context_layout

    monkeypatch.setenv("T2RAG_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data": {"source": str(shared_context_layout(tmp_path / "data", contexts=2))},
                "methods": ["oracle"],
                "prompts": {"max_context_chars": 1500},
                "generator": {"preset": PRESET, "enable_prefix_caching": True, "sampling": {"max_tokens": 8}},
                "out": str(out),
            }
        )
    )
    result = evaluate(config)
    got = records(out).values()
    assert len(got) >= 4
    assert all(r["generation_s"] > 0 and r["cached_prompt_tokens"] is not None for r in got)
    assert result["generation"]["oracle"]["all"]["cached_share"] >= 60


def test_a_batch_joins_the_running_one_on_the_real_engine():
    """Two batches from two threads, as two clients of one replica send them: the short one is answered while the
    long one still decodes (one `LLM.chat` per batch made it wait for the long one's last token), and each gets
    the text it gets alone."""
    from t2rag.generation.base import ChatRequest, SamplingParams
    from t2rag.generation.registry import PRESETS
    from t2rag.generation.vllm_engine import VLLMGenerator

    essay = ({"role": "user", "content": "Write a long essay on the history of stock exchanges."},)
    long = ChatRequest(essay, SamplingParams(max_tokens=40))
    short = [ChatRequest(({"role": "user", "content": f"What is {i} plus {i}?"},), SamplingParams(max_tokens=2))
             for i in range(3)]  # fmt: skip
    finished: dict[str, tuple[float, list]] = {}

    def run(name: str, requests: list[ChatRequest]) -> None:
        out = generator.generate(requests)
        finished[name] = (time.perf_counter(), out)

    with VLLMGenerator(PRESETS[PRESET]) as generator:
        [alone_long] = generator.generate([long])
        assert multiprocessing.active_children() == []  # single_process: no engine-core or worker process
        alone_short = generator.generate(short)
        thread = threading.Thread(target=run, args=("long", [long]))
        thread.start()
        while generator._feed.in_flight() == 0:
            time.sleep(0.005)
        run("short", short)
        thread.join()
    assert alone_long.completion_tokens == 40  # 20 times the short ones: waiting on it would show
    assert finished["short"][0] < finished["long"][0]
    assert [g.text for g in finished["short"][1]] == [g.text for g in alone_short]
    assert finished["long"][1][0].text == alone_long.text
