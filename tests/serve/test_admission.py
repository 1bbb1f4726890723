"""Admission control: what a replica refuses, from its measured drain rate, its bound and each request's deadline."""

from __future__ import annotations

import math

import pytest

from serve.admission import Admission, Overloaded


def test_admits_until_the_bound_then_refuses_with_retry_after():
    admission = Admission(max_pending=2, max_queue_wait_s=10.0, retry_after_s=3.0)
    admission.admit(math.inf, now=0.0)
    admission.admit(math.inf, now=0.0)
    with pytest.raises(Overloaded, match="2 requests are already waiting") as refused:
        admission.admit(math.inf, now=0.0)
    assert refused.value.retry_after_s == 3.0
    admission.done(now=0.1)
    admission.admit(math.inf, now=0.1)  # a place freed
    assert admission.pending == 2


def test_the_drain_rate_is_measured_while_busy_and_idle_time_does_not_count():
    admission = Admission(max_pending=100, max_queue_wait_s=10.0)
    assert admission.expected_wait_s() == 0.0  # nothing measured yet: admit
    admission.admit(math.inf, now=100.0)  # a busy period starts after a long idle time
    admission.admit(math.inf, now=100.0)
    admission.done(now=100.2)
    assert admission.interval_s == pytest.approx(0.2)  # not 100.2
    admission.done(now=100.4)
    assert admission.interval_s == pytest.approx(0.2)
    assert admission.pending == 0
    admission.admit(math.inf, now=500.0)  # idle again for minutes, then one request
    admission.done(now=500.2)
    assert admission.interval_s == pytest.approx(0.2)


def test_batches_that_finish_together_give_their_mean_rate():
    admission = Admission(max_pending=100, max_queue_wait_s=10.0)
    for batch in range(3):  # batches of 20 that take 0.6 s each: one request per 30 ms
        for _ in range(20):
            admission.admit(math.inf, now=batch * 0.6)
        for _ in range(20):
            admission.done(now=(batch + 1) * 0.6)
    assert admission.interval_s == pytest.approx(0.03)


def test_a_request_that_would_wait_past_its_deadline_or_the_bound_is_refused_at_once():
    admission = Admission(max_pending=100, max_queue_wait_s=0.5, retry_after_s=1.0)
    admission.admit(math.inf, now=0.0)
    admission.done(now=0.1)  # measured: one request leaves every 100 ms
    for _ in range(3):
        admission.admit(math.inf, now=1.0)
    assert admission.expected_wait_s() == pytest.approx(0.3)
    with pytest.raises(Overloaded, match=r"wait about 0\.30 s here, more than 0\.20 s"):
        admission.admit(deadline=1.2, now=1.0)  # its own deadline is sooner than its turn
    admission.admit(deadline=1.4, now=1.0)  # its turn comes in time
    admission.admit(math.inf, now=1.0)
    assert admission.expected_wait_s() == pytest.approx(0.5)
    admission.admit(math.inf, now=1.0)  # 0.5 s is still within the bound
    with pytest.raises(Overloaded, match=r"more than 0\.50 s") as refused:
        admission.admit(math.inf, now=1.0)  # 0.6 s is not
    assert refused.value.retry_after_s == 1.0
    assert admission.pending == 6
