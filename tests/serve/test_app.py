"""The real Serve app on loopback: answers, rankings equal to the in-process core, bad input, timeouts, replica loss.

Four applications on the kept Serve cluster. `rag` is the one `test_openai.py` also drives (`rag_app` in
tests/serve/conftest.py: the first 100 FinQA questions of the bundled sample with bm25, base, pretrained_only and
oracle, SmolLM2-135M as the generator, behind an API key, which every request here sends). `slow` has a
generator that never answers within its 1 s timeout and room for one request at a time (one running, one queued at
the proxy); `late` has one that never finishes starting; `numbers` has one that always answers the same number, so
the path from a generation to a served prediction is checked with a number in it.
"""

from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pyarrow as pa
import pytest

from tests.serve.conftest import KEY, SUBSET, wait_until_running

pytestmark = [pytest.mark.slow, pytest.mark.llm]

ONE_LINE_MAX = 400
LATE = "/late"
NUMBERS = "/numbers"


def _in_process_rankings(settings, questions) -> dict[str, tuple[list, list]]:
    """Rankings from the in-process core on the same config, for the first few questions."""
    import pyarrow as pa

    from serve.retrieval import index_lock
    from t2rag.methods import get_method
    from t2rag.pipeline.local import LocalRunner

    engine = LocalRunner(settings.run_config())
    texts = [q["question"] for q in questions]
    out = {}
    with index_lock(engine.config):  # the dense index is built once, here or by the base replica
        for name in ("bm25", "base"):
            batch = pa.table({"question": texts, "subset": [SUBSET] * len(texts), "method": [name] * len(texts)})
            ranked = engine.apply(get_method(name).stages, batch)
            out[name] = (ranked.column("context_ids").to_pylist(), ranked.column("scores").to_pylist())
    engine.resources.close()
    return out


def _wait_until_live(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while httpx.get(f"{url}/health", timeout=10).status_code != 200:
        assert time.monotonic() < deadline, f"{url} not live after {timeout_s} s"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def served(rag_app, rag_settings, rag_questions) -> Iterator[dict]:
    """The shared rag app and this module's three on the kept Serve cluster, plus the in-process rankings (computed
    while the replicas start)."""
    from ray import serve

    from serve.app import compose
    from serve.settings import ServeSettings

    from .faults import NeverReadyGenerator, ScriptedGenerator, StalledGenerator

    stalled = ServeSettings(
        data=rag_settings.data,
        subsets=[SUBSET],
        methods=["pretrained_only"],
        generation_timeout_s=1.0,
        max_ongoing_requests=1,
        max_queued_requests=1,
        retry_after_s=2.0,
    )
    serve.run_many(
        [
            serve.RunTarget(compose(stalled, generator=StalledGenerator.bind()), name="slow", route_prefix="/slow"),
            serve.RunTarget(compose(stalled, generator=NeverReadyGenerator.bind()), name="late", route_prefix=LATE),
            serve.RunTarget(
                compose(
                    rag_settings.model_copy(update={"methods": ["oracle", "bm25"]}), generator=ScriptedGenerator.bind()
                ),
                name="numbers",
                route_prefix=NUMBERS,
            ),
        ],
        wait_for_applications_running=False,
    )
    rankings = _in_process_rankings(rag_settings, rag_questions)
    wait_until_running(["rag", "slow", "numbers"], timeout_s=300)
    _wait_until_live(f"{rag_app}{LATE}", timeout_s=120)
    yield {"url": rag_app, "reference": rankings}
    for name in ("slow", "late", "numbers"):
        serve.delete(name)


@pytest.fixture(scope="module")
def reference(served) -> dict[str, tuple[list, list]]:
    return served["reference"]


@pytest.fixture(scope="module")
def client(served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served["url"], timeout=120, headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def assert_one_line_error(response: httpx.Response, status: int, fragment: str = "") -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    reason = body["error"]
    assert reason and "\n" not in reason and len(reason) <= ONE_LINE_MAX and "Traceback" not in reason
    assert fragment.lower() in reason.lower(), reason


# -- correct answers -----------------------------------------------------------------------------------------------
def test_ready_reflects_every_deployment(client):
    ready = client.get("/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    assert set(ready.json()["deployments"]) == {"Ingress", "Generator"}
    assert set(ready.json()["deployments"].values()) == {"HEALTHY"}
    # `late`: its ingress answers (liveness) while its generator is still starting, so it is not ready.
    assert client.get("/late/health").json() == {"status": "ok"}
    late = client.get("/late/ready")
    assert late.status_code == 503, late.text
    assert late.json()["status"] == "starting" and late.json()["deployments"]["Generator"] != "HEALTHY"
    assert late.json()["deployments"]["Ingress"] == "HEALTHY"


def test_health_and_methods(client):
    assert client.get("/health").json() == {"status": "ok"}
    info = client.get("/methods").json()
    by_name = {m["name"]: m for m in info["methods"]}
    assert list(by_name) == ["pretrained_only", "oracle", "bm25", "base"]
    assert (
        info["subsets"] == [SUBSET]
        and info["corpora"] == [SUBSET]
        and info["default_corpus"] == SUBSET
        and info["max_k"] == 20
    )
    assert info["default_k"] == 4  # the run config's retrieval.k
    assert info["generator"] == "smollm2-135m"
    assert by_name["bm25"]["retrieves"] and not by_name["bm25"]["needs_generator"]
    assert by_name["oracle"]["needs_context_id"] and by_name["oracle"]["endpoints"] == ["/answer"]
    assert by_name["pretrained_only"]["needs_generator"] and not by_name["pretrained_only"]["retrieves"]


def test_openapi_documents_every_route(client):
    schema = client.get("/openapi.json").json()
    assert {"/health", "/ready", "/methods", "/retrieve", "/answer", "/generate"} <= set(schema["paths"])
    retrieve = schema["components"]["schemas"]["RetrieveRequest"]["properties"]
    (k,) = [t for t in retrieve["k"]["anyOf"] if t["type"] == "integer"]  # or null: the app's default_k
    assert k["maximum"] == 20 and retrieve["question"]["maxLength"] == 2000
    assert all(field.get("description") for field in retrieve.values())
    assert "504" in schema["paths"]["/answer"]["post"]["responses"]


@pytest.mark.parametrize("method", ["bm25", "base"])
def test_retrieve_ranks_like_the_in_process_core(client, rag_questions, reference, method):
    ids, scores = reference[method]
    bodies = [
        {"question": q["question"], "method": method, "k": 3, "corpus": SUBSET, "with_text": i % 2 == 0}
        for i, q in enumerate(rag_questions)
    ]
    with ThreadPoolExecutor(len(bodies)) as pool:  # concurrent, so the replica batches them
        responses = list(pool.map(lambda body: client.post("/retrieve", json=body), bodies))
    for i, response in enumerate(responses):
        assert response.status_code == 200, response.text
        contexts = response.json()["contexts"]
        assert [c["context_id"] for c in contexts] == ids[i][:3]
        assert [c["score"] for c in contexts] == pytest.approx(scores[i][:3], rel=1e-4, abs=1e-6)
        assert all(c["subset"] == SUBSET for c in contexts)
        assert all(bool(c["text"]) == (i % 2 == 0) for c in contexts)  # texts only when asked for
        timing = dict(part.strip().split(";dur=") for part in response.headers["Server-Timing"].split(","))
        assert {"queue", "retrieve", "total"} <= set(timing) and float(timing["total"]) > 0


def test_retrieve_defaults_to_the_configs_k_and_the_loaded_corpus(client, rag_questions, reference):
    response = client.post("/retrieve", json={"question": rag_questions[0]["question"], "method": "bm25"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["corpus"] == SUBSET and [c["context_id"] for c in body["contexts"]] == reference["bm25"][0][0][:4]


def _check_answer(body: dict, method: str, n_contexts: int) -> None:
    """The reply's shape, and its answer as the batch runners's `parse_answers` reads the same generation over the
    same contexts' tables."""
    from t2rag.config import load_config
    from t2rag.resources import Resources
    from t2rag.stages import built
    from t2rag.stages.base import run_chain

    assert body["method"] == method and body["corpus"] == SUBSET and body["raw_output"]
    table_text = "\n\n".join(c["text"] for c in body["contexts"]) or None
    batch = pa.table({"raw_output": [body["raw_output"]], "table_text": pa.array([table_text], pa.string())})
    parsed = run_chain(built(Resources(load_config(None)), ("parse_answers",)), batch).to_pylist()[0]
    finite = parsed["prediction"] is not None and math.isfinite(parsed["prediction"])
    assert body["prediction"] == (parsed["prediction"] if finite else None)
    assert body["reasoning_steps"] == parsed["reasoning_steps"] and body["formula"] == parsed["formula"]
    assert body["json_ok"] is parsed["json_ok"] and body["prediction_source"] == parsed["prediction_source"]
    assert len(body["contexts"]) == n_contexts
    assert body["usage"]["completion_tokens"] > 0 and body["usage"]["prompt_tokens"] > 0
    timings = body["timings"]
    assert 0 <= timings["retrieval_s"] <= timings["total_s"] and 0 < timings["generation_s"] <= timings["total_s"]


def test_answer_with_retrieval(client, rag_questions):
    response = client.post("/answer", json={"question": rag_questions[0]["question"], "method": "bm25", "k": 1})
    assert response.status_code == 200, response.text
    _check_answer(response.json(), "bm25", 1)


def test_answer_oracle_reads_the_given_context(client, rag_questions):
    q = rag_questions[2]
    body = {"question": q["question"], "method": "oracle", "context_id": q["context_id"]}
    response = client.post("/answer", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    _check_answer(answer, "oracle", 1)
    assert answer["contexts"][0]["context_id"] == q["context_id"] and answer["contexts"][0]["score"] is None


def test_a_generated_number_is_the_served_prediction(client, rag_questions):
    """With a generator that answers a known number, /answer (retrieval and oracle) and the chat route serve it: a
    prediction dropped or read from anything but the generation fails here."""
    from .faults import SCRIPTED_ANSWER, SCRIPTED_NUMBER

    q = rag_questions[1]
    for body, n_contexts in (
        ({"question": q["question"], "method": "bm25"}, 4),
        ({"question": q["question"], "method": "oracle", "context_id": q["context_id"]}, 1),
    ):
        response = client.post(f"{NUMBERS}/answer", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        _check_answer(answer, body["method"], n_contexts)
        assert answer["prediction"] == SCRIPTED_NUMBER and answer["formula"] == "1500 - 1212.5"
    for stream in (False, True):
        chat = {"model": "bm25", "messages": [{"role": "user", "content": q["question"]}], "stream": stream}
        response = client.post(f"{NUMBERS}/v1/chat/completions", json=chat)
        assert response.status_code == 200, response.text
        if stream:
            events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
            rag = [e["t2rag"] for e in events if "t2rag" in e][-1]  # the first has the contexts, the last the answer
            text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        else:
            rag = response.json()["t2rag"]
            text = response.json()["choices"][0]["message"]["content"]
        assert rag["prediction"] == SCRIPTED_NUMBER and rag["raw_output"] == SCRIPTED_ANSWER, rag
        assert text.rstrip().endswith("Answer: 287.5"), text


def test_generate_returns_a_chat_completion(client):
    body = {"messages": [{"role": "user", "content": "Name one financial statement."}], "max_tokens": 12}
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["object"] == "chat.completion" and reply["text"]
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": reply["text"]}
    assert 0 < reply["usage"]["completion_tokens"] <= 12
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]


# -- bad input -----------------------------------------------------------------------------------------------------
Q = "What was the net change in revenue?"


@pytest.mark.parametrize(
    ("path", "body", "status", "fragment"),
    [
        ("/retrieve", {"question": "", "method": "bm25"}, 422, "question"),
        ("/retrieve", {"question": "   ", "method": "bm25"}, 422, "blank"),
        ("/retrieve", {"question": "x" * 2001, "method": "bm25"}, 422, "at most 2000"),
        ("/retrieve", {"question": Q, "method": "nope"}, 400, "unknown"),
        ("/retrieve", {"question": Q, "method": "hyde"}, 400, "not served"),
        ("/retrieve", {"question": Q, "method": "reranker"}, 400, "not served"),
        ("/retrieve", {"question": Q, "method": "oracle"}, 400, "does not retrieve"),
        ("/retrieve", {"question": Q, "method": "bm25", "corpus": "ConvFinQA"}, 400, "unknown corpus"),
        ("/retrieve", {"question": Q, "method": "bm25", "subset": SUBSET}, 422, "`subset` is now `corpus`"),
        ("/retrieve", {"question": Q, "method": "bm25", "k": 0}, 422, "k:"),
        ("/retrieve", {"question": Q, "method": "bm25", "k": 21}, 422, "k:"),
        ("/retrieve", {"question": Q, "method": "bm25", "k": "3"}, 422, "valid integer"),
        ("/retrieve", {"question": Q, "method": "bm25", "k": 2.5}, 422, "k:"),
        ("/retrieve", {"question": 42, "method": "bm25"}, 422, "valid string"),
        ("/retrieve", {"method": "bm25"}, 422, "question: field required"),
        ("/retrieve", {"question": Q, "method": "bm25", "extra": 1}, 422, "extra"),
        ("/retrieve", ["not", "an", "object"], 422, "body"),
        ("/answer", {"question": Q, "method": "oracle"}, 400, "context_id"),
        ("/answer", {"question": Q, "method": "oracle", "context_id": "nope"}, 400, "unknown context_id"),
        ("/answer", {"question": Q, "method": "bm25", "context_id": "finqa_dev_ctx_1"}, 400, "only to method oracle"),
        ("/generate", {"messages": []}, 422, "messages"),
        ("/generate", {"messages": [{"role": "robot", "content": "hi"}]}, 422, "role"),
        ("/generate", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}, 422, "max_tokens"),
    ],
)
def test_bad_input_is_a_4xx_with_one_line(client, path, body, status, fragment):
    assert_one_line_error(client.post(path, json=body), status, fragment)


def test_malformed_json_and_wrong_verbs(client):
    bad = client.post("/retrieve", content=b'{"question": ', headers={"content-type": "application/json"})
    assert_one_line_error(bad, 400, "not valid JSON")
    assert_one_line_error(client.get("/retrieve"), 405)
    assert_one_line_error(client.get("/no-such-route"), 404)


def test_oversized_bodies_are_refused(client):
    big = b'{"question": "' + b"x" * 70_000 + b'", "method": "bm25"}'
    declared = client.post("/retrieve", content=big, headers={"content-type": "application/json"})
    assert_one_line_error(declared, 413, "larger than 65,536 bytes")
    chunks = (big[i : i + 8192] for i in range(0, len(big), 8192))  # no Content-Length: the counted body decides
    streamed = client.post("/retrieve", content=chunks, headers={"content-type": "application/json"})
    assert_one_line_error(streamed, 413, "larger than")


def test_a_prompt_longer_than_the_window_is_a_422(client):
    long = " ".join(["revenue"] * 3000)  # about 3,000 tokens against a 2,048-token window
    response = client.post("/generate", json={"messages": [{"role": "user", "content": long}], "max_tokens": 16})
    assert_one_line_error(response, 422, "exceeds the context window of 2048")
    assert client.post("/generate", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).is_success


def test_a_body_shorter_than_its_content_length_is_a_408_in_bounded_time(served):
    host, port = served["url"].removeprefix("http://").split(":")
    started = time.monotonic()
    head = (f"POST /retrieve HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {KEY}\r\n"
            "Content-Type: application/json\r\nContent-Length: 500\r\n")  # fmt: skip
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(head.encode() + b'\r\n{"question": ')
        reply = b""
        while b"}" not in reply and (chunk := conn.recv(65536)):  # headers and body may come in separate reads
            reply += chunk
    reply = reply.decode()
    assert reply.startswith("HTTP/1.1 408"), reply
    assert "request body not received within 2 s" in reply
    assert time.monotonic() - started < 15


def test_a_bad_timeout_header_is_a_422(client):
    body = {"question": Q, "method": "bm25"}
    assert_one_line_error(client.post("/retrieve", json=body, headers={"X-Timeout-Ms": "soon"}), 422, "x-timeout-ms")
    assert_one_line_error(client.post("/retrieve", json=body, headers={"X-Timeout-Ms": "0"}), 422, "x-timeout-ms")


# -- faults and overload -------------------------------------------------------------------------------------------
def test_generator_timeout_is_a_504(client):
    started = time.monotonic()
    response = client.post("/slow/generate", json={"messages": [{"role": "user", "content": "hi"}]})
    assert_one_line_error(response, 504, "did not answer within 1 s")
    assert time.monotonic() - started < 15
    answer = client.post("/slow/answer", json={"question": Q, "method": "pretrained_only"})
    assert_one_line_error(answer, 504, "generator")


def test_a_request_deadline_shortens_the_timeout(client):
    started = time.monotonic()
    body = {"messages": [{"role": "user", "content": "hi"}]}
    response = client.post("/slow/generate", json=body, headers={"X-Timeout-Ms": "300"})
    assert_one_line_error(response, 504, "did not answer within 0.3 s")
    assert time.monotonic() - started < 0.9  # the route's own timeout is 1 s
    # A header cannot lengthen the route's timeout.
    response = client.post("/slow/generate", json=body, headers={"X-Timeout-Ms": "60000"})
    assert_one_line_error(response, 504, "did not answer within 1 s")


def test_a_saturated_queue_answers_503_with_retry_after_at_once(served):
    """`slow` holds one request and queues one more; the rest are refused at once, not after the 1 s timeout."""
    body = {"messages": [{"role": "user", "content": "hi"}]}

    def post(_: int) -> tuple[httpx.Response, float]:
        started = time.monotonic()
        with httpx.Client(base_url=served["url"], timeout=30) as c:
            return c.post("/slow/generate", json=body), time.monotonic() - started

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(post, range(6)))
    refused = [(r, seconds) for r, seconds in results if r.status_code == 503]
    served_late = [r for r, _ in results if r.status_code == 504]
    assert len(refused) >= 3 and len(served_late) >= 1, [r.status_code for r, _ in results]
    assert all(r.headers["Retry-After"] == "2" and seconds < 0.9 for r, seconds in refused)
    assert {r.status_code for r, _ in results} <= {503, 504}


def _replicas(app: str, deployment: str) -> set[str]:
    import ray

    return {
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "serve" and f"{app}#{deployment}#" in a["name"]
    }


def test_a_killed_ingress_replica_is_replaced(client, rag_questions):
    import ray

    body = {"question": rag_questions[3]["question"], "method": "bm25", "k": 2}
    expected = client.post("/retrieve", json=body).json()
    before = _replicas("rag", "Ingress")
    assert len(before) == 1
    ray.kill(ray.get_actor(next(iter(before)), namespace="serve"), no_restart=True)

    deadline = time.monotonic() + 120
    statuses = []
    while True:
        response = client.post("/retrieve", json=body)
        statuses.append(response.status_code)
        if response.status_code == 200:
            assert response.json() == expected
            if _replicas("rag", "Ingress") - before:
                break
        else:  # the proxy answers for a dead replica (its reason is plain text, not the app's JSON)
            assert response.status_code in (500, 503, 504), response.text
        assert time.monotonic() < deadline, f"no replacement replica answered within 120 s: {statuses[-10:]}"
        time.sleep(0.5)
    assert client.post("/retrieve", json={**body, "method": "base"}).status_code == 200
