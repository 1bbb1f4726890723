"""Routed methods served: `/retrieve` and the OpenAI-compatible chat route search the pooled corpus through a router,
the semantic one (the run's embedder) and the LLM one (the app's generator ranks the subsets first), through the
official `openai` client; the answers are scripted (what is tested is where each question is searched)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.serve.conftest import KEY, wait_until_running

pytestmark = pytest.mark.slow
ROUTED = "/routed"
METHODS = ["bm25", "bm25@pooled", "bm25@semantic", "bm25@llm"]


@pytest.fixture(scope="module")
def served(serve_url, tmp_path_factory) -> Iterator[dict]:
    from pydantic import SecretStr
    from ray import serve

    from serve.app import compose
    from serve.retrieval import Query, RetrievalService
    from serve.settings import ServeSettings
    from t2rag.methods import get_method
    from t2rag.resources import Resources
    from tests.conftest import HASHING, real_table, write_layout

    from .faults import RoutingGenerator

    root = write_layout(tmp_path_factory.mktemp("two"), {s: real_table(s).slice(0, 60) for s in ("FinQA", "TAT-DQA")})
    settings = ServeSettings(data=str(root), methods=METHODS, overrides={"retrieval": HASHING},
                             api_key=SecretStr(KEY), generation_timeout_s=60)  # fmt: skip
    serve.run_many([serve.RunTarget(compose(settings, generator=RoutingGenerator.bind()), name="routed",
                                    route_prefix=ROUTED)], wait_for_applications_running=False)  # fmt: skip
    config = settings.run_config()
    local = RetrievalService(Resources(config), [get_method(m) for m in METHODS])
    questions = local.resources.questions.scored().column("question").to_pylist()[::30]
    reference = {(q, m): local.rank([Query(q, m, "pooled", 3, False, math.inf)])[0] for q in questions
                 for m in ("bm25@pooled", "bm25@semantic")}  # fmt: skip
    wait_until_running(["routed"], timeout_s=300)
    yield {"url": f"{serve_url}{ROUTED}", "questions": questions, "reference": reference, "local": local}
    serve.delete("routed")


def test_retrieve_searches_where_the_router_sends_each_question(served):
    with httpx.Client(base_url=served["url"], timeout=120, headers={"Authorization": f"Bearer {KEY}"}) as client:
        for question in served["questions"]:
            for method in ("bm25@pooled", "bm25@semantic"):
                body = client.post("/retrieve", json={"question": question, "method": method, "k": 3}).json()
                expected = served["reference"][(question, method)]
                assert [c["context_id"] for c in body["contexts"]] == [c["context_id"] for c in expected.contexts]
                assert body["corpus"] == (expected.corpus or "pooled")
            routed = client.post("/retrieve", json={"question": question, "method": "bm25@llm", "k": 3}).json()
            assert routed["corpus"] == "TAT-DQA"  # the scripted generator ranks TAT-DQA first
            assert {c["subset"] for c in routed["contexts"]} == {"TAT-DQA"}


def test_the_chat_route_answers_over_the_llm_routers_subset(served):
    client = openai.OpenAI(base_url=f"{served['url']}/v1", api_key=KEY, max_retries=0, timeout=120)
    assert {m.id for m in client.models.list()} >= {"bm25@semantic", "bm25@llm"}
    question = served["questions"][0]
    reply = client.chat.completions.create(model="bm25@llm", messages=[{"role": "user", "content": question}])
    rag = reply.model_extra["t2rag"]
    assert rag["method"] == "bm25@llm" and rag["corpus"] == "TAT-DQA"
    assert rag["contexts"] and all(c["subset"] == "TAT-DQA" for c in rag["contexts"])
    (own,) = served["local"].rank([_query(question, "bm25", "TAT-DQA")])
    assert [c["context_id"] for c in rag["contexts"]] == [c["context_id"] for c in own.contexts[: len(rag["contexts"])]]


def _query(question: str, method: str, corpus: str):
    from serve.retrieval import Query

    return Query(question, method, corpus, 3, False, math.inf)
