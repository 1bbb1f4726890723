"""Every failure as a status code and a one-line JSON reason, never a traceback: `{"error": "..."}` on the app's
own routes, OpenAI's error object (`{"error": {"message", "type", "param", "code"}}`) on the OpenAI routes
(`/v1/...`), with the status codes the OpenAI SDKs map to their exception classes.

`install_error_handlers` registers the exception handlers on a FastAPI app. Failures that every route meets are
made here once, with one wording: a generation that gave no text (`generation_failure`), a deployment with no live
replica (`unavailable`) and a passed deadline (`timed_out`). The request guard is serve/guard.py.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from serve.schemas import ErrorResponse
from t2rag.errors import T2RagError
from t2rag.generation.base import REJECTED, is_rejected

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


def app_route(scope: Scope) -> str:
    """The request path inside the app (Serve passes an app's route prefix as root_path)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def is_openai(request: Request) -> bool:
    return app_route(request.scope).startswith(OPENAI_PREFIX)


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


def generation_failure(generation: dict[str, Any] | None) -> ApiError | None:
    """The error of a generation that gave no text, on every route (None when it gave one): a request the engine
    refuses as given (`t2rag.generation.base.REJECTED`) is a 422, any other failure a 502."""
    error = "the engine ended without a result" if generation is None else generation["generation_error"]
    if error is None:
        return None
    if is_rejected(error):
        return Unprocessable(f"the generator cannot run this request: {error.removeprefix(REJECTED)}")
    return BadGateway(f"generation failed: {error}")


def unavailable(what: str, retry_after_s: float = 1.0) -> Unavailable:
    """A deployment with no live replica right now (one may be restarting)."""
    return Unavailable(f"the {what} is unavailable right now (a replica may be restarting); retry", retry_after_s)


def timed_out(what: str, budget_s: float) -> GatewayTimeout:
    """A deployment that did not answer within the request's deadline."""
    return GatewayTimeout(f"the {what} did not answer within {budget_s:g} s")


def install_error_handlers(app: FastAPI) -> None:
    """Register the one-line error handlers on an app."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(T2RagError, _t2rag_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


def _documented(entries: list[tuple[int, str]]) -> dict[int | str, dict]:
    return {status: {"model": ErrorResponse, "description": text} for status, text in entries}


#: The failures a route documents in the OpenAPI schema: every route's, and a generating route's.
ROUTE_ERRORS = _documented(
    [
        (400, "bad input: unknown method or corpus, unparseable JSON, ..."),
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
