"""Admission control for one replica: refuse at once (503 with Retry-After) what could not start in time, rather than
queue it until it is late.

A request is admitted when fewer than `max_pending` requests wait or run here and the wait it would see (the
requests ahead of it over the rate this replica has been finishing them) ends within both its own deadline and
`max_queue_wait_s`. The rate is measured, not configured: the mean time between the last WINDOW completions while
the replica was busy, so it includes everything a request costs here (batching, model, search, the Serve hops) and
follows the load. A window rather than an exponential average, because batches finish together: a batch of 20 is
one long gap and 19 empty ones, which an average weighted toward the newest gaps reads as a much faster rate.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

#: Completions the drain rate is measured over.
WINDOW = 64


class Overloaded(Exception):
    """The replica would not answer this request in time; the client should come back after `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: float):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class Admission:
    """Counts the requests a replica holds and how fast they leave."""

    max_pending: int
    max_queue_wait_s: float
    retry_after_s: float = 1.0
    pending: int = 0
    _gaps: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))  # busy seconds before each completion
    _last_done: float | None = None

    @property
    def interval_s(self) -> float | None:
        """Measured seconds between completions while busy (None before the first)."""
        return sum(self._gaps) / len(self._gaps) if self._gaps else None

    def expected_wait_s(self) -> float:
        """How long a request admitted now would wait for the ones ahead of it (0 until a rate is measured)."""
        interval = self.interval_s
        return self.pending * interval if interval is not None else 0.0

    def admit(self, deadline: float, now: float | None = None) -> None:
        """Count a request in, or raise Overloaded when it could not start within its deadline or the queue bound."""
        now = time.monotonic() if now is None else now
        if self.pending >= self.max_pending:
            raise Overloaded(f"{self.pending} requests are already waiting here", self.retry_after_s)
        wait = self.expected_wait_s()
        if wait > self.max_queue_wait_s or now + wait > deadline:
            limit = min(self.max_queue_wait_s, max(deadline - now, 0.0))
            raise Overloaded(
                f"it would wait about {wait:.2f} s here, more than {limit:.2f} s",
                max(self.retry_after_s, math.ceil(wait)),
            )
        if self.pending == 0:  # a busy period starts: idle time is not work
            self._last_done = now
        self.pending += 1

    def done(self, now: float | None = None) -> None:
        """Count an admitted request out (answered, failed or given up on)."""
        now = time.monotonic() if now is None else now
        if self._last_done is not None:  # the replica was busy since then
            self._gaps.append(now - self._last_done)
        self._last_done = now
        self.pending -= 1
