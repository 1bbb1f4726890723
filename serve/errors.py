"""Every failure as a status code and a one-line JSON reason, never a traceback: `{"error": "..."}` on the app's
own routes, OpenAI's error object (`{"error": {"message", "type", "param", "code"}}`) on the OpenAI routes
(`/v1/...`), with the status codes the OpenAI SDKs map to their exception classes.

`install_error_handlers` registers the exception handlers on a FastAPI app; `install_guard` wraps it in
`RequestGuard`, which checks the API key (when one is set), rejects bodies over the size limit (by Content-Length,
and by counting what actually arrives) or slower than the time limit, records each request's route, method, status
and latency (serve/metrics.py), and turns anything unexpected into a short 500 while the traceback goes to the
server log.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import time
from dataclasses import dataclass

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve.metrics import METHOD_STATE, RequestMetrics
from serve.schemas import ErrorResponse
from t2rag.errors import T2RagError

log = logging.getLogger(__name__)

INTERNAL_ERROR = "internal error (details are in the server log)"


def squashed(text: str, limit: int = 400) -> str:
    """Collapse whitespace and cut long text, so a reason always fits on one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class ApiError(Exception):
    """An expected failure with its HTTP status; `param` and `code` fill OpenAI's error object."""

    status: int = 500

    def __init__(
        self, message: str, headers: dict[str, str] | None = None, param: str | None = None, code: str | None = None
    ):
        super().__init__(message)
        self.message = squashed(message)
        self.headers = headers
        self.param = param
        self.code = code


class BadRequest(ApiError):
    status = 400


class NotFound(ApiError):
    """An unknown model (method) on the OpenAI routes."""

    status = 404


class BadGateway(ApiError):
    """The generator ran but failed."""

    status = 502


class Unprocessable(ApiError):
    """The request is well formed but cannot be run as given (e.g. a prompt longer than the model's window)."""

    status = 422


class Unavailable(ApiError):
    """Overloaded, or a deployment has no live replica right now (e.g. one is being replaced): retry later."""

    status = 503

    def __init__(self, message: str, retry_after_s: float = 1.0):
        super().__init__(message, headers={"Retry-After": str(max(1, math.ceil(retry_after_s)))})


class GatewayTimeout(ApiError):
    """The request's deadline passed before its answer was ready."""

    status = 504


class BodyTooLarge(HTTPException):
    """Raised while the body is read; FastAPI re-raises HTTPExceptions from body reading unchanged."""

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=f"request body is larger than {limit:,} bytes")


class BodyTooSlow(HTTPException):
    """The body did not arrive in time (a Content-Length larger than what is sent, a stalled client)."""

    def __init__(self, limit_s: float):
        super().__init__(status_code=408, detail=f"request body not received within {limit_s:g} s")


#: OpenAI's error `type` for each status (what its SDKs and servers use).
OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    408: "timeout_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "server_error",
    503: "server_error",
    504: "timeout_error",
}
OPENAI_PREFIX = "/v1/"


def error_body(status: int, message: str, openai: bool, param: str | None = None, code: str | None = None) -> dict:
    """The JSON body of an error: OpenAI's object on the OpenAI routes, else `{"error": "..."}`."""
    if not openai:
        return {"error": squashed(message)}
    kind = OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": squashed(message), "type": kind, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
    openai: bool = False,
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(status, message, openai, param, code), status_code=status, headers=headers)


def is_openai(request: Request) -> bool:
    return _route(request.scope).startswith(OPENAI_PREFIX)


def validation_reason(exc: RequestValidationError) -> tuple[int, str]:
    """The first validation problem as (status, one line): 400 for unparseable JSON, else 422."""
    errors = exc.errors()
    if not errors:
        return 422, "invalid request"
    first = errors[0]
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "decode error")
        return 400, f"request body is not valid JSON ({detail})"
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    if not loc and first.get("type") == "missing":
        return 422, "a JSON object body is required"
    where = ".".join(loc) or "body"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return 422, f"{where}: {first.get('msg', 'invalid value')}{more}"


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.headers, is_openai(request), exc.param, exc.code)


async def _t2rag_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(400, str(exc), openai=is_openai(request))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    status, reason = validation_reason(exc)
    if not is_openai(request):
        return error_response(status, reason)
    first = (exc.errors() or [{}])[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    # OpenAI answers 400 for any invalid parameter; its SDKs raise BadRequestError for it.
    return error_response(400, reason, openai=True, param=".".join(loc) or None, code="invalid_value")


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = getattr(exc, "headers", None)
    return error_response(exc.status_code, str(exc.detail), headers, openai=is_openai(request))


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
        route = _route(scope)
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


def _route(scope: Scope) -> str:
    """The request path inside the app (Serve passes an app's route prefix as root_path)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


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


def install_error_handlers(app: FastAPI) -> None:
    """Register the one-line error handlers on an app."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(T2RagError, _t2rag_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


def install_guard(app: FastAPI, guard: GuardSettings, metrics: RequestMetrics | None = None) -> None:
    """Wrap an app in the request guard (before its first request)."""
    app.add_middleware(RequestGuard, guard=guard, metrics=metrics)


def _documented(entries: list[tuple[int, str]]) -> dict[int | str, dict]:
    return {status: {"model": ErrorResponse, "description": text} for status, text in entries}


#: The failures a route documents in the OpenAPI schema: every route's, and a generating route's.
ROUTE_ERRORS = _documented(
    [
        (400, "bad input: unknown method or subset, unparseable JSON, ..."),
        (413, "request body too large"),
        (422, "a field is missing, of the wrong type or out of range"),
        (503, "overloaded, or a deployment has no live replica right now: retry after `Retry-After` seconds"),
        (504, "the request's deadline passed (its X-Timeout-Ms, else the route's timeout)"),
    ]
)
GENERATION_ERRORS = {
    **ROUTE_ERRORS,
    **_documented(
        [
            (
                422,
                "a field is invalid, or the generator cannot run the request (e.g. the prompt is longer than the "
                "model's context window)",
            ),
            (502, "the generator failed"),
        ]
    ),
}
