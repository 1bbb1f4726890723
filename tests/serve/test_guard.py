"""The request guard (serve/guard.py): the API key, the body limits and the catch-all, on the small app of
tests/serve/test_errors.py in process (no Ray)."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from serve.errors import install_error_handlers
from serve.guard import GuardSettings, RequestGuard
from serve.schemas import RetrieveRequest
from tests.serve.test_errors import KEY, LIMIT, make_app, reason


@pytest.fixture(scope="module")
def client():
    with TestClient(make_app(), raise_server_exceptions=False) as c:
        yield c


def test_body_limit_by_header_and_by_counting(client):
    big = b'{"question": "' + b"x" * (LIMIT + 10) + b'", "method": "bm25"}'
    assert "larger than 1,024 bytes" in reason(
        client.post("/retrieve", content=big, headers={"content-type": "application/json"}), 413
    )
    chunks = iter([big[:600], big[600:]])  # streamed without Content-Length
    assert "larger than" in reason(
        client.post("/retrieve", content=chunks, headers={"content-type": "application/json"}), 413
    )


def test_unexpected_errors_are_a_short_500_and_logged(client, caplog):
    with caplog.at_level(logging.ERROR, logger="serve.guard"):
        text = reason(client.get("/boom"), 500)
    assert "secret" not in text and "File" not in text and "server log" in text
    assert "secret internals" in caplog.text and "Traceback" in caplog.text


def test_the_api_key_guards_every_route_but_the_probes_and_docs():
    with TestClient(make_app(api_key=KEY), raise_server_exceptions=False) as keyed:
        body = {"question": "q", "method": "bm25"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"X-Api-Key": KEY}):
            refused = keyed.post("/retrieve", json=body, headers=headers)
            assert "API key" in reason(refused, 401) and refused.headers["www-authenticate"] == "Bearer"
        assert keyed.post("/retrieve", json=body, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert keyed.post("/retrieve", json=body, headers={"authorization": f"bearer {KEY}"}).status_code == 200
        assert keyed.get("/health").json() == {"status": "ok"}
        assert keyed.get("/openapi.json").status_code == 200
        assert keyed.get("/docs").status_code == 200


def _stalled_request(guard: RequestGuard, declared: int, sent: bytes) -> tuple[list[dict], float]:
    """Drive the guard as a server would for a client that declares `declared` bytes but sends only `sent`."""
    sent_messages: list[dict] = []

    async def drive() -> float:
        chunks = [{"type": "http.request", "body": sent, "more_body": True}]

        async def receive() -> dict:
            if chunks:
                return chunks.pop()
            await asyncio.sleep(3600)  # the rest never comes
            raise AssertionError("unreachable")

        async def send(message: dict) -> None:
            sent_messages.append(message)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/retrieve",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(declared).encode())],
        }
        started = time.perf_counter()
        await guard(scope, receive, send)
        return time.perf_counter() - started

    return sent_messages, asyncio.run(drive())


def test_a_body_that_never_arrives_is_a_408_in_bounded_time():
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/retrieve")
    async def retrieve(body: RetrieveRequest) -> dict:
        return {"k": body.k}

    guard = RequestGuard(app, GuardSettings(max_body_bytes=LIMIT, body_timeout_s=0.3))
    messages, seconds = _stalled_request(guard, declared=500, sent=b'{"question": ')
    assert messages[0]["status"] == 408 and seconds < 2
    assert json.loads(messages[1]["body"]) == {"error": "request body not received within 0.3 s"}
