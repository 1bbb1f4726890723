"""A local Ray cluster for the ray_jobs tests: the logical CPUs a job gives a local cluster, two declared (fake) GPUs,
started and stopped as a job's own (`ray_jobs.local_cluster`: its reaper ends any worker that outlives the shutdown).

It starts after the loopback S3 server, so its workers inherit the S3 endpoint and credentials from the environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def job_cluster(**init_kwargs):
    """A local cluster as a job starts one (the logical CPUs it gives, 300 MB of object store, its reaper), with
    `init_kwargs` for `ray.init` on top and Ray Data's progress bars off; yields the `ray` module."""
    import ray

    from ray_jobs.local_cluster import local_cpus, start_local_cluster, stop_local_cluster

    ray.shutdown()
    start_local_cluster(num_cpus=local_cpus(), object_store_memory=300 * 2**20, **init_kwargs)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield ray
    finally:
        stop_local_cluster()


@pytest.fixture
def ray_local(s3_server, cluster_keeper):
    """The jobs' local cluster with two declared GPUs, kept for every test that asks for it (`tests/kept_cluster.py`:
    they run one after another, last). What a test leaves on it (warm workers, the driver's stage meter) the next
    finds there."""
    return cluster_keeper.enter("jobs", lambda: job_cluster(num_gpus=2))


#: How long each of the scripted server's answers takes in `answering_slowly`: a replica holds a batch long enough
#: for a test to take its node away.
ANSWER_S = 2.0


@pytest.fixture(scope="module")
def answering_slowly(tiny_data) -> Iterator[dict]:
    """The run config's `generator` section for the scripted server (`tests/scripted_server.py`), each of whose
    answers takes ANSWER_S: for tests of where a batch and a replica go, not of a model's answer."""
    from tests.scripted_server import scripted_for

    with scripted_for(tiny_data, delay_s=ANSWER_S) as generator:
        yield generator


@pytest.fixture
def recorded_services(monkeypatch) -> list:
    """The generator services `ray_jobs.evaluate` starts, in order (a test kills their replicas)."""
    from ray_jobs import evaluate

    services: list = []

    class Recorded(evaluate.GeneratorService):
        def __init__(self, config):
            super().__init__(config)
            services.append(self)

    monkeypatch.setattr(evaluate, "GeneratorService", Recorded)
    return services


def replica_holding_a_batch(services: list):
    """The first replica of the run's generator service while it holds a batch, else None (no service yet, no batch,
    or the replica still loading or restarting)."""
    import ray

    if not (services and services[0]._replicas):
        return None
    replica = services[0]._replicas[0]
    try:
        return replica if ray.get(replica.pending.remote(), timeout=5) > 0 else None
    except Exception:  # loading, restarting, or lost with its node
        return None
