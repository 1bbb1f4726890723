"""A replica's lanes: every request, answered or failed, gives its admission slot back."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from serve.deadlines import Deadline
from serve.errors import Unavailable
from serve.lanes import Lanes
from serve.settings import ServeSettings

CHAIN = ("bm25",)


def _lanes(fail: bool = False) -> Lanes:
    def rank(queries):
        return [RuntimeError("no index") if fail else f"ranked {q.question}" for q in queries]

    service = SimpleNamespace(chains={CHAIN: []}, rank=rank)
    return Lanes(service, ServeSettings(methods=["bm25"], max_ongoing_requests=3, max_batch_size=2))


def _rank(lanes: Lanes, question: str):
    method = SimpleNamespace(name="bm25", stages=CHAIN, router=None)
    return lanes.rank(method, "FinQA", question, 3, Deadline(30.0, None), texts=False)


def test_successful_retrievals_free_their_admission_slots():
    lanes = _lanes()

    async def many() -> list[str]:
        # Ten times the lane's bound, a few at a time: a slot not given back would refuse from the fourth on.
        done: list[str] = []
        for start in range(0, 30, 2):
            done += await asyncio.gather(*(_rank(lanes, f"q{i}") for i in range(start, start + 2)))
        return done

    assert asyncio.run(many()) == [f"ranked q{i}" for i in range(30)]
    assert lanes.lanes[CHAIN].admission.pending == 0


def test_failed_retrievals_free_theirs_too():
    lanes = _lanes(fail=True)

    async def many() -> None:
        for i in range(10):
            with pytest.raises(RuntimeError, match="no index"):
                await _rank(lanes, f"q{i}")

    asyncio.run(many())
    assert lanes.lanes[CHAIN].admission.pending == 0


def test_a_full_lane_refuses_with_503_and_retry_after():
    lanes = _lanes()
    admission = lanes.lanes[CHAIN].admission
    for _ in range(3):
        admission.admit(float("inf"))
    with pytest.raises(Unavailable, match="overloaded") as refused:
        asyncio.run(_rank(lanes, "q"))
    assert refused.value.status == 503 and int(refused.value.headers["Retry-After"]) >= 1
    assert admission.pending == 3  # the refused request took no slot
