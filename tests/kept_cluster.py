"""One local Ray cluster kept between the tests that ask for the same kind, so that a run of the Ray tests starts a
cluster per kind instead of one per module (each costs seconds of servers starting and, once Ray Data has run on
it, per-cluster actors and warm workers that the next module reuses).

The test session orders the tests that use a kept cluster last, grouped by kind (`tests/conftest.py`): once one is
up, only tests that share it run, and the keeper closes it before it opens the next kind, so two Ray clusters never
run at once here.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

#: The fixtures that hand out a kept cluster, in the order their tests run (each group one cluster).
KEPT_CLUSTER_FIXTURES = ("ray_local", "worker_nodes", "serve_url")


class ClusterKeeper:
    """Holds at most one cluster: `enter` returns the running one when it is of the kind asked for, else closes it
    and opens the new kind."""

    def __init__(self) -> None:
        self._kind: str | None = None
        self._value: Any = None
        self._stack = ExitStack()

    @property
    def running(self) -> bool:
        """Whether a kept cluster is up."""
        return self._kind is not None

    def enter(self, kind: str, open_cluster: Callable[[], AbstractContextManager[Any]]) -> Any:
        """The running cluster of `kind` (what its context manager yielded), opening it if another kind runs."""
        if self._kind != kind:
            self.close()
            self._value = self._stack.enter_context(open_cluster())
            self._kind = kind
        return self._value

    def close(self) -> None:
        """Shut down the kept cluster, if any."""
        self._kind, self._value = None, None
        self._stack.close()
