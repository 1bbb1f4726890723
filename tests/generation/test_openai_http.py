"""The OpenAI-compatible HTTP engine against llama.cpp's real server and a fault-injecting server."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

from t2rag.errors import ConfigError
from t2rag.generation.base import ChatRequest, SamplingParams, is_rejected
from t2rag.generation.openai_http import OpenAIConfig, OpenAIHTTPGenerator
from t2rag.generation.registry import build_generator
from t2rag.prompts import ANSWER_SCHEMA
from tests.conftest import free_port

from .conftest import FaultServer

SECRET = "sk-test-not-a-real-key-1234"


def ask(question: str, max_tokens: int = 32, **params: object) -> ChatRequest:
    return ChatRequest(({"role": "user", "content": question},), SamplingParams(max_tokens=max_tokens, **params))


def http_engine(base_url: str, **fields: object) -> OpenAIHTTPGenerator:
    engine = OpenAIHTTPGenerator(OpenAIConfig(model="smollm2", base_url=base_url, **fields))
    engine.backoff_base_s = 0.01  # keep retry tests quick; the backoff arithmetic is the same
    return engine


# --- configuration and payload ---------------------------------------------------------------------------------


def test_base_url_is_required() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        OpenAIHTTPGenerator(OpenAIConfig(model="m"))
    with pytest.raises(ConfigError):
        build_generator(OpenAIConfig(model="m"), cache=False)


def test_model_id_does_not_depend_on_the_host() -> None:
    first = http_engine("http://127.0.0.1:8000/v1")
    moved = http_engine("http://10.0.0.5:9000/v1/")
    assert first.model_id == moved.model_id == "smollm2"
    assert isinstance(build_generator(first.config, cache=False), OpenAIHTTPGenerator)


@pytest.mark.parametrize(
    ("json_mode", "constrained", "expected"),
    [
        ("json_schema", True, {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}}),
        ("json_object", True, {"type": "json_object", "schema": ANSWER_SCHEMA}),
        ("none", True, None),
        ("json_schema", False, None),
    ],
)
def test_payload_structured_output(json_mode: str, constrained: bool, expected: dict | None) -> None:
    engine = http_engine("http://127.0.0.1:1/v1", json_mode=json_mode, constrained_json=constrained)
    body = engine.payload(ask("q", max_tokens=7, json_schema=ANSWER_SCHEMA, seed=3, top_p=0.9))
    assert body["model"] == "smollm2"
    assert body["messages"] == [{"role": "user", "content": "q"}]
    assert (body["max_tokens"], body["seed"], body["top_p"], body["temperature"]) == (7, 3, 0.9, 0.0)
    assert body.get("response_format") == expected
    assert "response_format" not in engine.payload(ask("q"))  # no schema, nothing to enforce
    assert "seed" not in engine.payload(ask("q", seed=None))


# --- against the fault-injecting server ------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["429", "503"])
def test_transient_errors_are_retried(fault_server: FaultServer, status: str) -> None:
    fault_server.configure(status, failures=2)
    [result] = http_engine(fault_server.base_url, max_retries=5).generate([ask("hello")])
    assert result.error is None
    assert result.text == "echo: hello"
    assert (result.prompt_tokens, result.completion_tokens) == (7, 2)
    assert fault_server.calls == 3


def test_retry_after_replaces_the_backoff(fault_server: FaultServer) -> None:
    fault_server.configure("429", failures=2)  # answers Retry-After: 0
    engine = http_engine(fault_server.base_url, max_retries=3)
    engine.backoff_base_s = 30.0  # would take a minute without the header
    started = time.perf_counter()
    [result] = engine.generate([ask("hello")])
    assert result.error is None
    assert time.perf_counter() - started < 5


def test_retries_are_bounded(fault_server: FaultServer) -> None:
    fault_server.configure("503")
    [result] = http_engine(fault_server.base_url, max_retries=2).generate([ask("hello")])
    assert result.text == ""
    assert result.error is not None and "503" in result.error and "3 attempts" in result.error
    assert "\n" not in result.error
    assert fault_server.calls == 3


def test_client_errors_are_not_retried(fault_server: FaultServer) -> None:
    fault_server.configure("400")
    [result] = http_engine(fault_server.base_url, max_retries=5).generate([ask("hello")])
    assert result.error is not None and "HTTP 400" in result.error and "unknown field" in result.error
    assert is_rejected(result.error)  # the request's fault: a server passes it on as a 4xx
    assert fault_server.calls == 1


def test_timeout_is_an_error_entry(fault_server: FaultServer) -> None:
    fault_server.configure("slow", sleep_s=2.0)
    started = time.perf_counter()
    [result] = http_engine(fault_server.base_url, timeout_s=0.3, max_retries=0).generate([ask("hello")])
    assert result.error is not None and "timed out after 0.3 s" in result.error
    assert time.perf_counter() - started < 1.9
    assert fault_server.calls == 1


def test_connection_errors_are_retried_then_reported() -> None:
    engine = http_engine(f"http://127.0.0.1:{free_port()}/v1", max_retries=1)
    [result] = engine.generate([ask("hello")])
    assert result.error is not None and "connection error" in result.error and "2 attempts" in result.error


def test_batch_keeps_order_and_isolates_failures(fault_server: FaultServer) -> None:
    fault_server.configure("400", failures=1)  # only the first request to arrive fails
    engine = http_engine(fault_server.base_url, concurrency=1)
    results = engine.generate([ask(f"q{i}") for i in range(5)])
    assert results[0].error is not None
    assert [r.text for r in results[1:]] == [f"echo: q{i}" for i in range(1, 5)]
    assert engine.generate([]) == []


def test_api_key_is_sent_but_never_logged(
    fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("T2RAG_TEST_KEY", SECRET)
    fault_server.configure("503", failures=1)
    with caplog.at_level(logging.DEBUG):
        [result] = http_engine(fault_server.base_url, api_key_env="T2RAG_TEST_KEY").generate([ask("hi")])
    assert result.error is None
    sent = [{k.lower(): v for k, v in headers.items()} for headers in fault_server.headers]
    assert [h.get("authorization") for h in sent] == [f"Bearer {SECRET}"] * 2
    assert any("retry" in r.getMessage() for r in caplog.records)
    assert any("openai batch" in r.getMessage() for r in caplog.records)
    assert SECRET not in caplog.text
    assert all(SECRET not in repr(r.__dict__) for r in caplog.records)


def test_no_authorization_header_without_a_key(fault_server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("T2RAG_TEST_KEY", raising=False)
    http_engine(fault_server.base_url, api_key_env="T2RAG_TEST_KEY").generate([ask("hi")])
    assert "authorization" not in {k.lower() for k in fault_server.headers[0]}


def test_generate_works_inside_a_running_event_loop(fault_server: FaultServer) -> None:
    engine = http_engine(fault_server.base_url)

    async def caller() -> list:
        return engine.generate([ask("a"), ask("b")])

    results = asyncio.run(caller())
    assert [r.text for r in results] == ["echo: a", "echo: b"]


# --- against llama.cpp's real server ---------------------------------------------------------------------------


@pytest.mark.llm
@pytest.mark.slow
def test_real_server_batch_in_order(llama_server: str) -> None:
    # Prompts of increasing length: the reported prompt sizes show the results came back in request order.
    questions = ["Say hello.", "Say hello. " + "Please " * 20, "Say hello. " + "Please " * 60]
    engine = http_engine(llama_server, concurrency=2)
    results = engine.generate([ask(q, max_tokens=16) for q in questions])
    assert all(r.error is None and r.text.strip() for r in results)
    assert all(r.completion_tokens > 0 for r in results)
    sizes = [r.prompt_tokens for r in results]
    assert 0 < sizes[0] < sizes[1] < sizes[2]


@pytest.mark.llm
@pytest.mark.slow
def test_real_server_json_object_mode(llama_server: str) -> None:
    system = (
        'Answer with JSON like {"reasoning_steps": ["growth = (new - old) / old"], '
        '"final_formula": "(120 - 100) / 100", "computed_formula": "0.2"}.'
    )
    request = ChatRequest(
        ({"role": "system", "content": system}, {"role": "user", "content": "Profit fell from 50 to 40. Change?"}),
        SamplingParams(max_tokens=200, json_schema=ANSWER_SCHEMA),
    )
    [result] = http_engine(llama_server, json_mode="json_object").generate([request])
    assert result.error is None
    answer = json.loads(result.text)
    assert set(ANSWER_SCHEMA["required"]) <= answer.keys()
