"""Timing a call as timeit does: the collector off while it runs, back on after, whatever happens."""

from __future__ import annotations

import gc
import time

import pytest

from t2rag.progress import call_seconds


def test_a_call_is_timed_with_the_collector_off() -> None:
    seen = []
    took = call_seconds(lambda: (seen.append(gc.isenabled()), time.sleep(0.05)))
    assert seen == [False] and 0.05 <= took < 1.0
    assert gc.isenabled()


def test_the_collector_is_back_on_after_a_call_that_fails() -> None:
    with pytest.raises(ZeroDivisionError):
        call_seconds(lambda: 1 / 0)
    assert gc.isenabled()
