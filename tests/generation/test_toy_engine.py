"""Adding an engine is one module plus its registry line: a toy engine defined and registered here runs through the
single-process runner, a Ray run and `t2rag serve`, placed and served as its `Engine` says, with no other change.

Other processes (Ray's workers, the served app and its replicas) learn of it from `T2RAG_ENGINES`, as an engine
from outside the project would be registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import httpx
import pytest

from t2rag.config import load_config
from t2rag.generation.base import ChatRequest, Generation, Generator
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.engine import Batching, Engine
from t2rag.generation.registry import ENGINES, engine_of, register_engine
from t2rag.pools import PoolShape
from t2rag.run_folder.files import read_records
from tests.conftest import stop_started

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


class ToyConfig(GeneratorConfig):
    engine: Literal["toy"] = "toy"
    answer: float = 7.25  # the number of every answer


class ToyGenerator(Generator):
    """Answers every request with the same formula, counting the prompt's characters as its tokens."""

    engine = "toy"

    def __init__(self, config: ToyConfig):
        self.config = config

    @property
    def model_id(self) -> str:
        return f"toy/{self.config.model}"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        text = json.dumps({"reasoning_steps": ["toy"], "final_formula": repr(self.config.answer)})
        return [Generation(text, sum(len(m["content"]) for m in r.messages), 1, finish_reason="stop") for r in requests]


class ToyEngine(Engine):
    name = "toy"
    config_class = ToyConfig
    packages = ("pluggy",)  # a distribution no run records unless its engine declares it

    def build(self, config: ToyConfig) -> Generator:
        return ToyGenerator(config)

    def batching(self, config: ToyConfig) -> Batching:
        return "one_at_a_time"

    def placement(self, config: ToyConfig) -> PoolShape:
        return PoolShape(config.replicas, 0.5, 0.0, config.batch_size, gpus_together=1)


ENGINE = ToyEngine()
GENERATOR = {"engine": "toy", "model": "counting", "answer": 7.25, "replicas": 2, "batch_size": 3}


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setenv("T2RAG_ENGINES", __name__)
    register_engine(ENGINE)
    yield
    ENGINES.pop("toy")


def _config(data: str, out: Path, **fields):
    return load_config(None, {"data": {"source": data}, "methods": ["bm25", "oracle"], "limit": 3, "out": str(out),
                              "generator": GENERATOR, **fields})  # fmt: skip


def _answers(out: Path) -> dict[tuple[str, str], dict]:
    rows = read_records(str(out)).select(
        ["method", "id", "prediction", "raw_output", "generation_error", "prompt_tokens"]
    )
    return {(r["method"], r["id"]): r for r in rows.to_pylist() if r["raw_output"] is not None}


def test_a_toy_engine_runs_in_one_process_and_on_ray(toy, tiny_data, tmp_path):
    from ray_jobs.evaluate import run_ray
    from ray_jobs.pools import generator_pool
    from t2rag.pipeline.local import run_local

    local = _config(tiny_data, tmp_path / "local")
    assert type(local.generator) is ToyConfig and engine_of(local.generator) is ENGINE
    run_local(local)
    distributed = _config(tiny_data, tmp_path / "ray", runner="ray")
    pool = generator_pool(distributed)
    assert (pool.engine, pool.shape.actors, pool.shape.cpus, pool.shape.gpus) == (
        "toy",
        2,
        0.5,
        0.0,
    )  # as the engine places it
    run_ray(distributed)
    answers, on_ray = _answers(tmp_path / "local"), _answers(tmp_path / "ray")
    assert len(answers) == 2 * 2 * 3  # two subsets, three sampled questions, two methods
    assert on_ray == answers
    assert {(a["prediction"], a["generation_error"]) for a in answers.values()} == {(7.25, None)}
    assert all(a["prompt_tokens"] > 100 for a in answers.values())  # the real prompts reached the toy engine
    for run in ("local", "ray"):  # the engine's own packages are in each run's manifest
        assert "pluggy" in json.loads((tmp_path / run / "manifest.json").read_text())["versions"]


def test_t2rag_serve_serves_a_toy_engine(toy, tiny_data, tmp_path):
    from tests.conftest import free_port

    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({"data": {"source": tiny_data}, "methods": ["bm25"], "generator": GENERATOR}))
    port = free_port()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "t2rag.cli", "serve", "--config", str(config), "--port", str(port)]
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ})  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while f"serving on http://127.0.0.1:{port}" not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        url = f"http://127.0.0.1:{port}"
        question = {"question": "What was the change in net revenue?", "method": "bm25", "k": 2}
        answer = httpx.post(f"{url}/answer", json=question, timeout=60).json()
        assert answer["prediction"] == 7.25 and len(answer["contexts"]) == 2 and answer["usage"]["prompt_tokens"] > 100
        chat = {"model": "bm25", "messages": [{"role": "user", "content": question["question"]}]}
        reply = httpx.post(f"{url}/v1/chat/completions", json=chat, timeout=60).json()
        assert reply["t2rag"]["prediction"] == 7.25 and reply["object"] == "chat.completion"
        generated = httpx.post(f"{url}/generate", json={"messages": [{"role": "user", "content": "Hi"}]}, timeout=60)
        assert (
            json.loads(generated.json()["text"])["final_formula"] == "7.25" and generated.json()["model"] == "counting"
        )
        assert httpx.get(f"{url}/methods", timeout=10).json()["generator"] == "counting"
    finally:
        stop_started(process, 60)
