"""Engine for any OpenAI-compatible `/v1/chat/completions` server (vLLM, Ray Serve LLM, llama.cpp's server)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import ssl
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from functools import cache
from typing import Any, Literal

import httpx
from pydantic import Field

from t2rag.errors import ConfigError
from t2rag.generation.base import (
    ChatRequest,
    ChunkStream,
    Delta,
    Generation,
    Generator,
    log_batch,
    rejected,
    reported_cached_tokens,
)
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.engine import Batching, Engine
from t2rag.model_access import Availability

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 120.0  # never sleep longer than this, whatever a server asks for


@cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs), made once per process: every batch opens a client in its own
    event loop, and loading the CA bundle for each took about 50 ms, a quarter of a scripted run's time."""
    return httpx.create_ssl_context()


#: Statuses by which an OpenAI-compatible server refuses the request as sent (vLLM answers 400 for a prompt longer
#: than the model's window); 401, 403 and 404 are the generator's configuration, not the request.
_REJECTING = frozenset({400, 413, 422})


class _Retryable(Exception):
    """A failure worth another attempt; `wait` is the server's Retry-After, if any."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


class _Fatal(Exception):
    """A failure another attempt would repeat (a 4xx other than 429, an unreadable reply)."""


class OpenAIConfig(GeneratorConfig):
    """An OpenAI-compatible chat-completions server (vLLM, Ray Serve LLM, llama.cpp's server, a hosted API)."""

    engine: Literal["openai"] = "openai"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this variable, never stored
    json_mode: Literal["json_schema", "json_object", "none"] = "json_schema"
    concurrency: int = Field(8, ge=1)
    timeout_s: float = Field(300.0, gt=0)
    max_retries: int = Field(5, ge=0)


class OpenAIEngine(Engine):
    name = "openai"
    config_class = OpenAIConfig
    packages = ("httpx",)

    def build(self, config: OpenAIConfig) -> Generator:
        return OpenAIHTTPGenerator(config)

    def weights(self, config: OpenAIConfig) -> Availability:
        return Availability(True, f"served by {config.base_url} (not checked here)")

    def batching(self, config: OpenAIConfig) -> Batching:
        return "concurrent"


class OpenAIHTTPGenerator(Generator):
    """Sends a batch as concurrent chat-completion requests, with retries, and returns the results in order."""

    engine = "openai"
    backoff_base_s = 0.5
    backoff_cap_s = 20.0

    def __init__(self, config: OpenAIConfig):
        if not config.base_url:
            raise ConfigError(f"generator '{config.name}': engine 'openai' needs base_url (e.g. http://HOST:8000/v1)")
        self.config = config
        self.base_url = config.base_url.rstrip("/")

    @property
    def model_id(self) -> str:
        # Host-independent, so cached generations survive a server moving to another port or machine.
        return self.config.model

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        if not requests:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._run_batch(list(requests)))
        # Called from inside a running event loop (a notebook, an async app): use a private loop in a worker thread.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, self._run_batch(list(requests))).result()

    def stream(self, request: ChatRequest) -> Iterator[Delta]:
        """The server's streamed chat completion (server-sent events), passed on as it arrives; one attempt."""
        body = {**self.payload(request), "stream": True, "stream_options": {"include_usage": True}}
        stream = ChunkStream()
        try:
            with (
                httpx.Client(
                    base_url=self.base_url + "/",
                    headers=self._headers(),
                    timeout=self.config.timeout_s,
                    verify=_tls(),
                ) as c,
                c.stream("POST", "chat/completions", json=body) as response,
            ):
                if response.status_code >= 400:
                    status, text = response.status_code, _squash(response.read().decode(errors="replace"))
                    error = f"HTTP {status}: {text}"
                    yield Delta(done=Generation(text="", error=rejected(error) if status in _REJECTING else error))
                    return
                for line in response.iter_lines():
                    if not line.startswith("data:") or line.strip() == "data: [DONE]":
                        continue
                    yield from stream.read(json.loads(line.removeprefix("data:").strip()))
        except (httpx.HTTPError, ValueError) as exc:
            yield Delta(done=Generation(text="", error=f"stream failed: {type(exc).__name__}: {_squash(str(exc))}"))
            return
        yield Delta(done=stream.generation())

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def _run_batch(self, requests: list[ChatRequest]) -> list[Generation]:
        started = time.perf_counter()
        limits = httpx.Limits(
            max_connections=self.config.concurrency, max_keepalive_connections=self.config.concurrency
        )
        semaphore = asyncio.Semaphore(self.config.concurrency)
        async with httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=self._headers(),
            timeout=httpx.Timeout(self.config.timeout_s),
            limits=limits,
            verify=_tls(),
        ) as client:
            results = await asyncio.gather(*(self._run_one(client, semaphore, i, r) for i, r in enumerate(requests)))
        log_batch(self.engine, results, time.perf_counter() - started)
        return list(results)

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of one chat-completion request."""
        params = request.params
        body: dict[str, Any] = {"model": self.config.model, "messages": list(request.messages), **params.decoding()}
        schema = params.json_schema
        if self.config.constrained_json and schema:
            if self.config.json_mode == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
            elif self.config.json_mode == "json_object":
                body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    async def _run_one(
        self, client: httpx.AsyncClient, semaphore: asyncio.Semaphore, index: int, request: ChatRequest
    ) -> Generation:
        body = self.payload(request)
        attempts = self.config.max_retries + 1
        async with semaphore:
            started = time.perf_counter()
            for attempt in range(attempts):
                try:
                    reply = await self._post(client, body)
                    return _parse(reply, time.perf_counter() - started)
                except _Fatal as exc:
                    return Generation(text="", seconds=time.perf_counter() - started, error=str(exc))
                except _Retryable as exc:
                    if attempt + 1 == attempts:
                        error = f"{exc} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})"
                        return Generation(text="", seconds=time.perf_counter() - started, error=error)
                    delay = self._delay(attempt, exc.wait)
                    log.warning("request %d: %s; retry %d/%d in %.1f s", index, exc, attempt + 1, attempts - 1, delay)
                    await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
        timeout = self.config.timeout_s
        try:
            # httpx's timeout bounds each phase; this bounds the whole request.
            async with asyncio.timeout(timeout):
                response = await client.post("chat/completions", json=body)
        except (TimeoutError, httpx.TimeoutException):
            raise _Retryable(f"request timed out after {timeout:g} s") from None
        except httpx.TransportError as exc:
            raise _Retryable(f"connection error: {type(exc).__name__}: {_squash(str(exc))}") from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise _Retryable(f"HTTP {status}: {_squash(response.text)}", _retry_after(response))
        if status in _REJECTING:
            raise _Fatal(rejected(f"HTTP {status}: {_squash(response.text)}"))
        if status >= 400:
            raise _Fatal(f"HTTP {status}: {_squash(response.text)}")
        try:
            return response.json()
        except ValueError:
            raise _Fatal(f"HTTP {status}: reply is not JSON: {_squash(response.text)}") from None

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_S)
        exponential = min(self.backoff_cap_s, self.backoff_base_s * 2**attempt)
        return min(self.backoff_cap_s, exponential + random.uniform(0, self.backoff_base_s))


def _parse(reply: dict[str, Any], seconds: float) -> Generation:
    try:
        text = reply["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise _Fatal(f"unexpected reply: {_squash(str(reply))}") from None
    usage = reply.get("usage") or {}
    return Generation(
        text=text,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        seconds=seconds,
        finish_reason=reply["choices"][0].get("finish_reason"),
        cached_prompt_tokens=reported_cached_tokens(usage),
    )


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _squash(text: str, limit: int = 300) -> str:
    """One line, shortened: error messages end up in result tables."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


ENGINE = OpenAIEngine()
