"""One-line JSON errors on a small FastAPI app in process (no Ray); the app is guarded as served ones are
(tests/serve/test_guard.py)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from serve.errors import BadRequest, GatewayTimeout, install_error_handlers, squashed
from serve.guard import GuardSettings, install_guard
from serve.openai_api import GenerateRequest
from serve.schemas import RetrieveRequest
from t2rag.errors import InputError

LIMIT = 1024
KEY = "s3cret-key"


def make_app(api_key: str | None = None) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    install_guard(app, GuardSettings(max_body_bytes=LIMIT, body_timeout_s=5.0, api_key=api_key))

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.post("/retrieve")
    async def retrieve(body: RetrieveRequest) -> dict:
        return {"k": body.k, "method": body.method}

    @app.post("/generate")
    async def generate(body: GenerateRequest) -> dict:
        return {"n": len(body.messages)}

    @app.get("/boom")
    async def boom() -> dict:
        raise RuntimeError("secret internals\n  File x.py, line 3")

    @app.get("/bad")
    async def bad() -> dict:
        raise BadRequest("unknown corpus 'X'\n(loaded: FinQA)")

    @app.get("/slow")
    async def slow() -> dict:
        raise GatewayTimeout("the generator did not answer within 2 s")

    @app.get("/core")
    async def core() -> dict:
        raise InputError("unknown corpus 'Y'")

    return app


@pytest.fixture(scope="module")
def client():
    with TestClient(make_app(), raise_server_exceptions=False) as c:
        yield c


def reason(response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and "\n" not in body["error"]
    return body["error"]


def test_valid_request_passes(client):
    # No k: the app's default (its run config's retrieval.k) applies further in.
    assert client.post("/retrieve", json={"question": "q", "method": "bm25"}).json() == {"k": None, "method": "bm25"}
    assert client.post("/retrieve", json={"question": "q", "method": "bm25", "k": 4}).json()["k"] == 4


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"method": "bm25"}, "question: Field required"),
        ({"question": "q", "method": "bm25", "k": "3"}, "k: Input should be a valid integer"),
        ({"question": "q", "method": "bm25", "k": True}, "k: Input should be a valid integer"),
        ({"question": "q", "method": "bm25", "k": 21}, "k: Input should be less than or equal to 20"),
        ({"question": "q", "method": "bm25", "zzz": 1}, "zzz: Extra inputs are not permitted"),
        ({"question": 1, "method": 2}, "question: Input should be a valid string (and 1 more problem)"),
        ({"question": "\t \n", "method": "bm25"}, "question: Value error, must not be blank"),
    ],
)
def test_validation_errors_are_one_line_422s(client, body, expected):
    assert reason(client.post("/retrieve", json=body), 422) == expected


def test_float_fields_accept_integers_in_strict_mode(client):
    body = {"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "top_p": 1}
    assert client.post("/generate", json=body).json() == {"n": 1}


def test_unparseable_json_is_a_400(client):
    response = client.post("/retrieve", content=b"{nope", headers={"content-type": "application/json"})
    assert reason(response, 400).startswith("request body is not valid JSON")


def test_api_and_core_errors_keep_their_status(client):
    assert reason(client.get("/bad"), 400) == "unknown corpus 'X' (loaded: FinQA)"
    assert reason(client.get("/slow"), 504) == "the generator did not answer within 2 s"
    assert reason(client.get("/core"), 400) == "unknown corpus 'Y'"
    assert reason(client.get("/nowhere"), 404) == "Not Found"
    assert reason(client.get("/retrieve"), 405) == "Method Not Allowed"


def test_one_line_collapses_and_cuts():
    assert squashed("a\n  b\tc") == "a b c"
    assert len(squashed("x" * 1000)) == 400 and squashed("x" * 1000).endswith("...")
