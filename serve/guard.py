"""The request guard, ASGI middleware around the served app: it checks the API key (when one is set), rejects bodies
over the size limit (by Content-Length, and by counting what actually arrives) or slower than the time limit,
records each request's route, method, status and latency (serve/metrics.py), and turns anything unexpected into a
short 500 while the traceback goes to the server log."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve.errors import INTERNAL_ERROR, OPENAI_PREFIX, BodyTooLarge, BodyTooSlow, app_route, error_body
from serve.metrics import METHOD_STATE, RequestMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GuardSettings:
    """What `RequestGuard` enforces on every request."""

    max_body_bytes: int
    body_timeout_s: float
    api_key: str | None = None  # when set, `Authorization: Bearer <key>` is required outside OPEN_PATHS


#: Routes answered without the API key: probes from load balancers and the API's own documentation.
OPEN_PATHS = frozenset({"/health", "/ready", "/docs", "/openapi.json"})


class RequestGuard:
    """ASGI middleware: the API key, limits on body size and on the time the body takes to arrive, and a
    last-resort handler for errors nothing else caught."""

    def __init__(self, app: ASGIApp, guard: GuardSettings, metrics: RequestMetrics | None = None):
        self.app = app
        self.guard = guard
        self.metrics = metrics
        self._key = guard.api_key.encode() if guard.api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = app_route(scope)
        openai = route.startswith(OPENAI_PREFIX)
        started_at = time.perf_counter()
        status = 500

        async def reply(answer: int, reason: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
            nonlocal status
            status = answer
            error_code = "invalid_api_key" if answer == 401 else None
            await _send_json(send, answer, error_body(answer, reason, openai, code=error_code), extra)

        if self._key is not None and route not in OPEN_PATHS and not self._authorized(scope):
            await reply(401, "missing or wrong API key (send Authorization: Bearer <key>)", _CHALLENGE)
            self._record(scope, route, status, started_at)
            return
        limit = self.guard.max_body_bytes
        declared = _content_length(scope)
        if declared is not None and (declared < 0 or declared > limit):
            reason = BodyTooLarge(limit).detail if declared >= 0 else "invalid Content-Length header"
            await reply(413 if declared >= 0 else 400, reason)
            self._record(scope, route, status, started_at)
            return
        received = 0
        started = False
        deadline = asyncio.get_running_loop().time() + self.guard.body_timeout_s
        body_done = False

        async def counted_receive() -> Message:
            nonlocal received, body_done
            if body_done:  # after the body only a disconnect can come: wait for it without a deadline
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTooSlow(self.guard.body_timeout_s) from None
            if message["type"] == "http.request":
                body_done = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started, status
            if message["type"] == "http.response.start":
                started, status = True, message["status"]
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except Exception:
            log.exception("unexpected error handling %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await reply(500, INTERNAL_ERROR)
        finally:
            self._record(scope, route, status, started_at)

    def _record(self, scope: Scope, route: str, status: int, started_at: float) -> None:
        if self.metrics is not None:
            method = (scope.get("state") or {}).get(METHOD_STATE, "-")
            self.metrics.record(route, method, status, time.perf_counter() - started_at)

    def _authorized(self, scope: Scope) -> bool:
        assert self._key is not None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key)
        return False


_CHALLENGE = [(b"www-authenticate", b"Bearer")]


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


async def _send_json(send: Send, status: int, payload: dict, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install_guard(app: FastAPI, guard: GuardSettings, metrics: RequestMetrics | None = None) -> None:
    """Wrap an app in the request guard (before its first request)."""
    app.add_middleware(RequestGuard, guard=guard, metrics=metrics)
