"""ray_jobs.common on a local cluster: the stage meter, and the threads a worker runs."""

from __future__ import annotations

import contextlib
import os
import time

import pytest

from ray_jobs.common import report, stage_meter, use_held_cpus

pytestmark = pytest.mark.slow


def _meters(ray) -> list[str]:
    """The states of every StageMeter actor the cluster has had, dead ones included."""
    from ray_jobs.ray_private import all_actors

    return [a["State"] for a in all_actors() if a["ActorClassName"].endswith("StageMeter")]


def _report_from_a_worker(ray, rows: int) -> None:
    ray.get(ray.remote(num_cpus=0)(report).remote("embed_passages", rows, 0.25))


def _without_a_meter(ray) -> list[str]:
    """End the meter an earlier run of this driver left on the kept cluster, if any; the meters' states then."""
    from ray_jobs.common import METER_NAME

    with contextlib.suppress(ValueError):  # none
        ray.kill(ray.get_actor(METER_NAME))
    deadline = time.monotonic() + 30
    while "ALIVE" in (states := _meters(ray)):
        assert time.monotonic() < deadline, states
        time.sleep(0.1)
    return states


def test_workers_report_to_the_jobs_meter_and_never_start_one(ray_local):
    before = sorted(_without_a_meter(ray_local))
    _report_from_a_worker(ray_local, 64)
    _report_from_a_worker(ray_local, 64)
    assert sorted(_meters(ray_local)) == before  # no job meter: the figures are dropped, no actor started for them

    meter = stage_meter()
    _report_from_a_worker(ray_local, 64)
    _report_from_a_worker(ray_local, 32)
    deadline = time.monotonic() + 30
    while (stats := ray_local.get(meter.report.remote())).get("embed_passages", {}).get("rows", 0) < 96:
        assert time.monotonic() < deadline, stats
        time.sleep(0.1)
    assert stats["embed_passages"]["rows"] == 96
    assert stats["embed_passages"]["busy_s"] == pytest.approx(0.5)
    assert sorted(_meters(ray_local)) == sorted([*before, "ALIVE"])  # the driver's own, the only one started


def test_a_worker_sizes_its_tokenizer_threads_by_the_cpus_it_holds(ray_local):
    """RAYON_NUM_THREADS (read by the Rust tokenizers when their pool starts) is the CPUs the actor holds, unless the
    user set it."""

    @ray_local.remote(num_cpus=1)
    class Worker:
        def threads(self) -> tuple[int, str]:
            return use_held_cpus(torch_threads=False), os.environ["RAYON_NUM_THREADS"]

    assert ray_local.get(Worker.remote().threads.remote()) == (1, "1")
    users = Worker.options(runtime_env={"env_vars": {"RAYON_NUM_THREADS": "3"}}).remote()
    assert ray_local.get(users.threads.remote()) == (1, "3")
