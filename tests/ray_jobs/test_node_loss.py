"""A worker node lost in the middle of a run on a multi-node cluster: the same command finishes by itself.

The cluster runs on this machine, on loopback: a head (no CPUs: the driver and the meter only) and two workers that
declare one GPU each, where the embedding actors (one GPU) and the generator replica run. Once the first records
are written, the worker holding the generator replica is removed as a spot node would be (no graceful shutdown),
and a replacement joins a few seconds later. The run must exit normally with exactly one record per (method, id)
and the metrics of the same run on the intact cluster.
"""

from __future__ import annotations

import threading
import time

import pyarrow.parquet as pq
import pytest

from ray_jobs import evaluate
from t2rag.config import load_config
from t2rag.pipeline.records import read_records

pytestmark = pytest.mark.slow

STORE = 200 * 2**20
WORKER = {"num_cpus": 8, "num_gpus": 1, "object_store_memory": STORE}


def _config(data, out, index, seed):
    return load_config(
        None,
        {
            "data": {"source": data},
            "methods": ["oracle", "bm25", "base"],
            "retrieval_only_methods": ["bm25", "base"],
            "limit": 3,
            "runner": "ray",
            "out": str(out),
            "retrieval": {"index_uri": str(index)},
            "generator": {
                "preset": "smollm2-135m",
                "n_ctx": 4096,
                "sampling": {"max_tokens": 24, "seed": seed},
                "batch_size": 2,
            },
            "prompts": {"max_context_chars": 500},
            "ray": {
                "block_rows": 2,
                "retrieve_block_rows": 8,
                "embed_gpus": 1,
                "embed_cpus": 1,
                "engine_timeout_s": 120,
            },
        },
    )


@pytest.fixture
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    from ray_jobs.ray_private import allow_clusters_on_one_host

    ray.shutdown()
    allow_clusters_on_one_host()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": STORE})
    workers = [cluster.add_node(**WORKER) for _ in range(2)]
    ray.init(address=cluster.address)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield cluster, workers
    finally:
        ray.shutdown()
        cluster.shutdown()


def _records(out) -> dict:
    table = read_records(str(out)).to_pydict()
    keys = list(zip(table["method"], table["id"], strict=True))
    assert len(keys) == len(set(keys)), "a (method, id) has more than one record"
    return dict(zip(keys, zip(table["context_ids"], table["prediction"], table["number_match"], strict=True),
                    strict=True))  # fmt: skip


def test_losing_the_generators_node_mid_run_finishes_without_a_rerun(cluster, tiny_data, tmp_path, recorded_services):
    import ray

    c, workers = cluster
    # Each run builds its own index, and a seed of its own keeps it from the other's cached generations (decoding
    # is greedy, so the seed changes no output): both runs do the same work, and their times compare.
    started = time.monotonic()
    whole = evaluate.run_ray(_config(tiny_data, tmp_path / "whole", tmp_path / "index-whole", seed=1))
    uninterrupted_s = time.monotonic() - started

    services = recorded_services
    services.clear()  # only the interrupted run's service
    out = tmp_path / "lost"
    result: dict = {}

    def run() -> None:
        try:
            result["summary"] = evaluate.run_ray(_config(tiny_data, out, tmp_path / "index-lost", seed=2))
        except BaseException as exc:  # reported below; the test fails on it
            result["error"] = exc

    thread = threading.Thread(target=run)
    started = time.monotonic()
    thread.start()
    deadline = time.monotonic() + 300
    while not (services and services[0]._replicas and any((out / "records").glob("*.parquet"))):
        assert time.monotonic() < deadline and thread.is_alive(), result
        time.sleep(0.2)
    holder = ray.get(services[0]._replicas[0].where.remote(), timeout=60)["node_id"]
    (lost,) = [w for w in workers if w.node_id == holder]
    written = sum(pq.ParquetFile(f).metadata.num_rows for f in (out / "records").glob("*.parquet"))
    c.remove_node(lost, allow_graceful=False)
    time.sleep(5)
    c.add_node(**WORKER)  # the replacement node (in the main thread: it installs signal handlers)
    thread.join(timeout=600)
    interrupted_s = time.monotonic() - started
    assert not thread.is_alive(), "the run did not finish within 10 minutes of losing a node"
    assert "error" not in result, result.get("error")
    summary = result["summary"]
    assert summary["methods"] == whole["methods"]  # the metrics of the uninterrupted run
    assert _records(out) == _records(tmp_path / "whole")
    assert written < len(_records(out))  # the node went while generation was still going on
    assert summary["attempts"]["still_failed"] == 0
    # One engine per replica start: the first, and the restart on the replacement node.
    assert whole["model_loads"]["smollm2-135m"] == 1 and summary["model_loads"]["smollm2-135m"] == 2
    print(f"\nnode-loss run {interrupted_s:.0f} s, uninterrupted {uninterrupted_s:.0f} s, "
          f"attempts {summary['attempts']}, model loads {summary['model_loads']}")  # fmt: skip
