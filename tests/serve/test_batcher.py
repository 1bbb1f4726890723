"""The serving batcher: a batch is what waits when the worker comes free, given-up requests are left out, and a
per-item exception reaches only its own caller."""

from __future__ import annotations

import asyncio
import threading

import pytest

from serve.batcher import Batcher


def test_batches_are_what_waited_while_the_last_one_ran():
    release = threading.Event()
    batches: list[list[int]] = []

    def work(items: list[int]) -> list[int]:
        batches.append(items)
        if items == [0]:
            release.wait(5)  # the first batch holds the worker while the others arrive
        return [i * 10 for i in items]

    async def main() -> list[int]:
        batcher = Batcher(work, max_size=3)
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0.05)
        rest = [asyncio.create_task(batcher.submit(i)) for i in range(1, 6)]
        await asyncio.sleep(0.05)
        release.set()
        return await asyncio.gather(first, *rest)

    assert asyncio.run(main()) == [0, 10, 20, 30, 40, 50]
    assert batches == [[0], [1, 2, 3], [4, 5]]  # bounded by max_size, in arrival order


def test_a_cancelled_request_costs_nothing_and_exceptions_stay_with_their_item():
    release = threading.Event()
    seen: list[int] = []

    def work(items: list[int]) -> list[object]:
        seen.extend(items)
        if items == [0]:
            release.wait(5)
        return [ValueError(f"bad {i}") if i == 2 else i for i in items]

    async def main() -> None:
        batcher = Batcher(work, max_size=8)
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0.05)
        late = asyncio.create_task(batcher.submit(1))
        bad = asyncio.create_task(batcher.submit(2))
        good = asyncio.create_task(batcher.submit(3))
        await asyncio.sleep(0.05)
        late.cancel()  # its deadline passed while it waited
        release.set()
        assert await first == 0 and await good == 3
        with pytest.raises(ValueError, match="bad 2"):
            await bad

    asyncio.run(main())
    assert seen == [0, 2, 3]
