"""The served path on a real vLLM engine (`make test-vllm`): Ray Serve LLM runs vLLM's CPU build on the exported
SmolLM2, the t2rag app's Generator deployment reaches it over its OpenAI route, and /generate and /answer return
real answers. The wiring is `t2rag serve`'s (serve.app.compose with `llm_base_url`, serve.llm.build_llm_app)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import free_port, real_table, requires_vllm, write_layout

pytestmark = [pytest.mark.vllm, pytest.mark.slow, requires_vllm]

GENERATOR = {"preset": "vllm-cpu-smollm2", "sampling": {"max_tokens": 32}}


@pytest.fixture(scope="module")
def client(tmp_path_factory, short_system_prompt) -> Iterator[httpx.Client]:
    import ray
    from ray import serve

    from serve.app import compose
    from serve.llm import LLM_ROUTE, build_llm_app
    from serve.settings import ServeSettings

    data = write_layout(tmp_path_factory.mktemp("finqa"), {"FinQA": real_table("FinQA").slice(0, 40)})
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=6, num_gpus=1, include_dashboard=False, object_store_memory=300 * 2**20, log_to_driver=False)
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(build_llm_app({"generator": GENERATOR}), name="llm", route_prefix=LLM_ROUTE)
        settings = ServeSettings(
            data=str(data),
            subsets=["FinQA"],
            methods=["pretrained_only", "oracle", "bm25"],
            generator=GENERATOR,
            overrides={"prompts": {"max_context_chars": 300, "answer_system": short_system_prompt}},
            llm_base_url=f"http://127.0.0.1:{port}{LLM_ROUTE}/v1",
            generation_timeout_s=300,
        )
        serve.run(compose(settings), name="t2rag", route_prefix="/")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as c:
            yield c
    finally:
        serve.shutdown()
        ray.shutdown()


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
