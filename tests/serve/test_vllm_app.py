"""The served path on a real vLLM engine (`make test-vllm`), started as a user starts it: `t2rag serve` with the
`vllm-cpu-smollm2` preset runs Ray Serve LLM on vLLM's CPU build (the exported SmolLM2) beside the t2rag app, whose
Generator deployment reaches it over its OpenAI route; /generate and /answer return real answers, and an evaluation
through the served route writes records. The local Ray cluster declares no GPU: a `device: cpu` generator needs
none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import free_port, real_table, requires_vllm, write_layout
from tests.generation.vllm_runs import evaluate, records, run_config

pytestmark = [pytest.mark.vllm, pytest.mark.slow, requires_vllm]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("served")
    write_layout(root / "finqa", {"FinQA": real_table("FinQA").slice(0, 40)})
    write_layout(root / "both", {name: real_table(name).slice(0, 40) for name in ("FinQA", "TAT-DQA")})
    return root


@pytest.fixture(scope="module")
def client(root, short_system_prompt) -> Iterator[httpx.Client]:
    data = root / "finqa"
    config = {
        "data": {"source": str(data)},
        "methods": ["pretrained_only", "oracle", "bm25"],
        "prompts": {"max_context_chars": 300, "answer_system": short_system_prompt},
        "generator": {"preset": "vllm-cpu-smollm2", "sampling": {"max_tokens": 32}},
    }
    (root / "run.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    command = [sys.executable, "-m", "t2rag.cli", "serve", "--config", str(root / "run.yaml"), "--port", str(port)]
    log = root / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while f"serving on http://127.0.0.1:{port}" not in log.read_text():  # printed once every deployment is ready
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(1)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as c:
            yield c
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_ready_and_generate_through_vllm(client):
    assert client.get("/ready").json()["status"] == "ready"
    body = {"messages": [{"role": "user", "content": "Name one financial statement."}], "max_tokens": 16}
    reply = client.post("/generate", json=body)
    assert reply.status_code == 200, reply.text
    assert reply.json()["text"] and 0 < reply.json()["usage"]["completion_tokens"] <= 16


def test_answer_retrieves_and_answers_through_vllm(client):
    question = real_table("FinQA").slice(0, 1).to_pylist()[0]
    reply = client.post("/answer", json={"question": question["question"], "method": "bm25", "k": 2})
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["raw_output"] and len(answer["contexts"]) == 2 and answer["usage"]["completion_tokens"] > 0
    # The answer schema is enforced: the output is JSON from its first character (32 tokens may cut it short).
    assert answer["raw_output"].lstrip().startswith("{"), answer["raw_output"]


def test_an_evaluation_through_the_served_llm_writes_records(client, root, short_system_prompt):
    """`t2rag eval` with the openai generator on the served LLM route: records of pretrained_only, oracle and base
    for a seeded sample of both subsets, answered by the served vLLM engine and scored like every other engine's."""
    generator = {
        "engine": "openai",
        "model": "smollm2-135m",
        "base_url": str(client.base_url).rstrip("/") + "/llm/v1",
        "json_mode": "json_schema",
    }
    out = root / "through-serve"
    summary = evaluate(run_config(str(root / "both"), out, generator, "local", short_system_prompt))
    assert set(summary["methods"]) == {"pretrained_only", "oracle", "base"}
    answered = list(records(out).values())
    assert len(answered) == 3 * 2 * 2  # methods x subsets x questions
    for row in answered:
        assert row["generation_error"] is None and 0 < row["completion_tokens"] <= 32, row
