"""Every request's deadline: the route's configured timeout, shortened by the request's `X-Timeout-Ms` header; a
handle call awaited until then, with replica faults mapped to 503 and the deadline to 504."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from fastapi import Header
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentResponse

from serve.errors import BadRequest, timed_out, unavailable
from serve.schemas import MAX_TIMEOUT_MS
from t2rag.errors import T2RagError

log = logging.getLogger(__name__)
T = TypeVar("T")

#: What a handle call raises when no replica can take it right now.
UNAVAILABLE = (RayActorError, ActorUnavailableError, DeploymentUnavailableError, BackPressureError)

TimeoutHeader = Annotated[
    int | None,
    Header(
        alias="X-Timeout-Ms",
        ge=1,
        le=MAX_TIMEOUT_MS,
        description="the longest the client waits, in milliseconds: the server answers 504 then (a retrieval it could "
        "not answer by then is refused at once, 503); default and upper bound: the route's configured timeout",
    ),
]


class Deadline:
    """When a request stops being worth answering: its route's timeout, or sooner by its X-Timeout-Ms header."""

    def __init__(self, timeout_s: float, header_ms: int | None):
        self.budget_s = timeout_s if header_ms is None else min(timeout_s, header_ms / 1000)
        self.started = time.monotonic()
        self.at = self.started + self.budget_s

    def left_s(self) -> float:
        return max(self.at - time.monotonic(), 0.0)


async def call_until(response: DeploymentResponse, deadline: Deadline, what: str) -> Any:
    """Await a handle call until the request's deadline, mapping replica faults to 503/504 and t2rag errors to 400."""
    try:
        return await asyncio.wait_for(_awaited(response), deadline.left_s())
    except TimeoutError:
        response.cancel()
        raise timed_out(what, deadline.budget_s) from None
    except UNAVAILABLE as exc:
        log.warning("%s unavailable: %s", what, type(exc).__name__)
        raise unavailable(what) from None
    except RayTaskError as exc:
        if isinstance(exc.cause, T2RagError):
            raise BadRequest(str(exc.cause)) from None
        raise


async def _awaited(response: Awaitable[T]) -> T:
    return await response


def server_timing(seconds: dict[str, float]) -> str:
    """A Server-Timing header value: each step's duration in milliseconds."""
    return ", ".join(f"{name};dur={1000 * value:.2f}" for name, value in seconds.items())
