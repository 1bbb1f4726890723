"""The served path on a real vLLM engine (`make test-vllm`), started as a user starts it: `t2rag serve` with the
`vllm-cpu-smollm2` preset runs Ray Serve LLM on vLLM's CPU build (the exported SmolLM2) beside the t2rag app, whose
Generator deployment reaches it over its OpenAI route; /generate and /answer return real answers. The local Ray
cluster declares no GPU: a `device: cpu` generator needs none."""

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

pytestmark = [pytest.mark.vllm, pytest.mark.slow, requires_vllm]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(tmp_path_factory, short_system_prompt) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("served")
    data = write_layout(root / "finqa", {"FinQA": real_table("FinQA").slice(0, 40)})
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
