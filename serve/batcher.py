"""Batches that form when the worker comes free: everything waiting then (up to a bound) is one batch.

Written here rather than using `@serve.batch` because Serve's batcher forms the next batch as soon as the previous
one starts, then holds it until that one finishes: under steady load every batch is the one or two requests that
arrived in between, and the rest wait behind them (docs/performance.md, "Why the defaults in the code"). Here the
batch is taken
when the work can start, so its size follows the load, and a request given up on (its future cancelled at its
deadline) is left out before any work is spent on it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    """Runs `work` (a blocking function of a list of items, returning one result per item) in a thread, one batch
    at a time; `submit` awaits one item's result."""

    def __init__(self, work: Callable[[list[T]], Sequence[R]], max_size: int):
        self.work = work
        self.max_size = max_size
        self._waiting: deque[tuple[T, asyncio.Future[R]]] = deque()
        self._ready = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, future))
        self._ready.set()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run())
        return await future

    def _take(self) -> list[tuple[T, asyncio.Future[R]]]:
        batch = []
        while self._waiting and len(batch) < self.max_size:
            item, future = self._waiting.popleft()
            if not future.done():  # a cancelled future: its caller gave up
                batch.append((item, future))
        return batch

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while batch := self._take():
                try:
                    results: Sequence[R | BaseException] = await asyncio.to_thread(self.work, [i for i, _ in batch])
                except Exception as exc:
                    results = [exc] * len(batch)
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():
                        continue
                    if isinstance(result, BaseException):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
