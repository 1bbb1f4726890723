"""The served path on a real vLLM engine (`make test-vllm`), started as a user starts it: `t2rag serve` with the
`vllm-cpu-smollm2` preset runs Ray Serve LLM's engine deployment on vLLM's CPU build (the exported SmolLM2) inside
the t2rag app, reached through its handle and behind the app's API key; /generate, /answer and the OpenAI routes
(driven by the official client) return real answers, streamed as vLLM produces them. The local Ray cluster declares
no GPU: a `device: cpu` generator needs none."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import free_port, real_table, requires_vllm, stop_started, write_layout

pytestmark = [pytest.mark.vllm, pytest.mark.slow, requires_vllm]

ROOT = Path(__file__).resolve().parents[2]
KEY = "served-vllm-key"


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
    env = {**os.environ, "T2RAG_API_KEY": KEY}
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    try:
        deadline = time.monotonic() + 600
        while f"serving on http://127.0.0.1:{port}" not in log.read_text():  # printed once every deployment is ready
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(1)
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300, headers=headers) as c:
            yield c
    finally:
        stop_started(process, 120)


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


def test_the_openai_client_through_vllm(client):
    """models, a chat completion, the same request streamed (equal text under greedy decoding), a cut at
    max_tokens, and the key on every route: the engine has no route of its own."""
    import openai

    base = str(client.base_url).rstrip("/")
    api = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0, timeout=300)
    assert [m.id for m in api.models.list()] == ["pretrained_only", "bm25"]
    question = [{"role": "user", "content": real_table("FinQA").slice(0, 1).to_pylist()[0]["question"]}]
    whole = api.chat.completions.create(model="bm25", messages=question, temperature=0)
    assert "Answer: " in whole.choices[0].message.content and whole.usage.completion_tokens > 0
    pieces = [
        c.choices[0].delta.content
        for c in api.chat.completions.create(model="bm25", messages=question, temperature=0, stream=True)
        if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) >= 2 and "".join(pieces) == whole.choices[0].message.content
    cut = api.chat.completions.create(model="pretrained_only", messages=question, max_tokens=1)
    assert cut.choices[0].finish_reason == "length"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0).models.list()
    for path in ("/llm/v1/chat/completions", "/v1/chat/completions", "/answer"):
        assert httpx.post(f"{base}{path}", json={}).status_code == 401, path


def test_served_replicas_are_picked_by_prefix_unless_reuse_is_off():
    """The served engine deployment routes by prompt prefix (Serve LLM's own router, which the served tests above
    go through); `prefix_reuse: false` leaves Serve's default."""
    from ray.serve.llm.request_router import PrefixCacheAffinityRouter

    from t2rag.generation.registry import PRESETS
    from t2rag.generation.vllm_engine import llm_config

    preset = PRESETS["vllm-cpu-smollm2"]
    routed = llm_config(preset).deployment_config["request_router_config"]["request_router_class"]
    module, _, name = routed.rpartition(".")
    assert getattr(importlib.import_module(module), name) is PrefixCacheAffinityRouter
    plain = llm_config(preset.model_copy(update={"prefix_reuse": False})).deployment_config
    assert "request_router_config" not in plain
