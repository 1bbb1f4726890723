"""Every failure as a status code and a one-line JSON reason, `{"error": "..."}`, never a traceback.

`install_error_handling` registers the exception handlers on a FastAPI app and wraps it in `RequestGuard`, which
rejects bodies over the size limit (by Content-Length, and by counting what actually arrives) and turns anything
unexpected into a short 500 while the traceback goes to the server log.
"""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from t2rag.errors import T2RagError

log = logging.getLogger(__name__)

INTERNAL_ERROR = "internal error (details are in the server log)"


def one_line(text: str, limit: int = 400) -> str:
    """Collapse whitespace and cut long text, so a reason always fits on one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class ApiError(Exception):
    """An expected failure with its HTTP status."""

    status: int = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = one_line(message)


class BadRequest(ApiError):
    status = 400


class BadGateway(ApiError):
    """The generator ran but failed."""

    status = 502


class Unavailable(ApiError):
    """A deployment has no live replica right now (e.g. one is being replaced)."""

    status = 503


class GatewayTimeout(ApiError):
    """A deployment did not answer within its configured timeout."""

    status = 504


class BodyTooLarge(HTTPException):
    """Raised while the body is read; FastAPI re-raises HTTPExceptions from body reading unchanged."""

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=f"request body is larger than {limit:,} bytes")


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": one_line(message)}, status_code=status, headers=headers)


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
    return error_response(exc.status, exc.message)


async def _t2rag_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(400, str(exc))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    status, reason = validation_reason(exc)
    return error_response(status, reason)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return error_response(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))


class RequestGuard:
    """ASGI middleware: a body size limit, and a last-resort handler for errors nothing else caught."""

    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and (declared < 0 or declared > self.max_body_bytes):
            reason = BodyTooLarge(self.max_body_bytes).detail if declared >= 0 else "invalid Content-Length header"
            await _send_json(send, 413 if declared >= 0 else 400, reason)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except Exception:
            log.exception("unexpected error handling %s %s", scope.get("method"), scope.get("path"))
            if not started:
                await _send_json(send, 500, INTERNAL_ERROR)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


async def _send_json(send: Send, status: int, reason: str) -> None:
    body = json.dumps({"error": one_line(reason)}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install_error_handling(app: FastAPI, max_body_bytes: int) -> None:
    """Register the one-line error handlers and the request guard on an app."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(T2RagError, _t2rag_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(RequestGuard, max_body_bytes=max_body_bytes)
