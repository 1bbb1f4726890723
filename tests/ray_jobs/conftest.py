"""The ray_jobs tests' kept clusters (`tests/kept_cluster.py`): the local cluster a job starts (`ray_local`) and a
cluster of several nodes on loopback (`worker_nodes`).

`ray_local`: the logical CPUs a job gives a local cluster, two declared (fake) GPUs, started and stopped as a job's
own (`ray_jobs.local_cluster`: its reaper ends any worker that outlives the shutdown). It starts after the loopback
S3 server, so its workers inherit the S3 endpoint and credentials from the environment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

STORE = 300 * 2**20
#: A worker node of `worker_nodes`: 8 logical CPUs and 1 declared GPU, as a GPU node's share of a cluster.
WORKER = {"num_cpus": 8, "num_gpus": 1, "object_store_memory": STORE}
#: Its head: no CPUs, so the driver and the run's stage meter run there and every other actor and task on the workers.
HEAD = {"num_cpus": 0, "object_store_memory": STORE}


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


@dataclass
class WorkerNodes:
    """A cluster of a head and worker nodes on loopback (`ray.cluster_utils.Cluster`) whose tests take workers
    away, as a lost spot node goes, and add them; `workers` are those still up."""

    cluster: Any
    workers: list = field(default_factory=list)

    def add_worker(self):
        """Join one more worker of the WORKER shape (in the main thread: it installs signal handlers)."""
        worker = self.cluster.add_node(**WORKER)
        self.workers.append(worker)
        return worker

    def remove_worker(self, worker) -> None:
        """Take a worker away without a graceful shutdown, as a lost node goes."""
        self.cluster.remove_node(worker, allow_graceful=False)
        self.workers.remove(worker)

    def exactly(self, count: int) -> WorkerNodes:
        """Remove or add workers until `count` are up; returns self."""
        while len(self.workers) > count:
            self.remove_worker(self.workers[-1])
        while len(self.workers) < count:
            self.add_worker()
        self.cluster.wait_for_nodes()
        return self


@contextmanager
def head_and_workers() -> Iterator[WorkerNodes]:
    """A head with no CPUs and two workers (WORKER) on loopback, the driver connected to the head's raylet."""
    import ray
    from ray.cluster_utils import Cluster

    from ray_jobs.ray_private import allow_clusters_on_one_host

    ray.shutdown()
    allow_clusters_on_one_host()
    cluster = Cluster(initialize_head=True, head_node_args=HEAD)
    ray.init(address=cluster.address)  # before the workers join: the driver stays on the head's raylet
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield WorkerNodes(cluster).exactly(2)
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def worker_nodes(cluster_keeper) -> WorkerNodes:
    """The kept cluster of a head and two workers (`head_and_workers`); a test that takes workers away leaves
    them so, and the next asks for the count it needs (`WorkerNodes.exactly`)."""
    import ray

    from ray_jobs.common import METER_NAME

    nodes = cluster_keeper.enter("worker-nodes", head_and_workers)
    # Each test's run starts its own stage meter, as a job's driver does: the meter a run left after ending in
    # GeneratorUnavailable (test_generator_unavailable.py) did not answer the next run's final reads here.
    with contextlib.suppress(ValueError):  # no meter yet
        ray.kill(ray.get_actor(METER_NAME))
    return nodes
