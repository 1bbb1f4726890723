"""Cluster-shaped tests: a multi-node cluster with GPU-declaring workers, and `ray job submit` against a head."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_embedding_actors_run_on_the_gpu_nodes(tiny_data, tmp_path):
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.state import list_actors

    from ray_jobs.build_index import embed_corpus
    from ray_jobs.table_blocks import input_tasks
    from t2rag.config import load_config
    from t2rag.resources import Resources

    ray.shutdown()
    store = 200 * 2**20
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": store})
    gpu_nodes = [cluster.add_node(num_cpus=2, num_gpus=1, object_store_memory=store) for _ in range(2)]
    try:
        ray.init(address=cluster.address)
        ray.data.DataContext.get_current().enable_progress_bars = False
        assert input_tasks() is None  # several nodes: input tasks as Ray Data chooses, unbounded by this machine
        config = load_config(
            None,
            {
                "data": {"source": tiny_data},
                "out": str(tmp_path),
                "ray": {"embed_actors": 2, "embed_gpus": 1, "embed_batch_size": 2},
            },
        )
        corpus = Resources(config).corpus("FinQA")
        vectors = embed_corpus(config, corpus)
        assert vectors.shape == (len(corpus), 384)
        gpu_node_ids = {n.node_id for n in gpu_nodes}
        actors = [a for a in list_actors(detail=True) if "EmbedPassages" in (a.class_name or "")]
        assert actors, "no embedding actors were recorded"
        assert {a.node_id for a in actors} <= gpu_node_ids  # never on the CPU-only head
        assert len({a.node_id for a in actors}) == 2  # one actor per GPU node
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def ray_head(tmp_path):
    """A real Ray head with its dashboard, started with this environment's Python first on PATH."""
    port, dashboard = free_port(), free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 107 bytes
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", RAY_AUTH_MODE="disabled")
    cmd = [
        Path(sys.executable).parent / "ray", "start", "--head", "--block", "--port", str(port), "--num-cpus", "6",
        "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard), "--include-dashboard", "true",
        "--disable-usage-stats", "--object-store-memory", str(300 * 2**20), "--temp-dir", temp_dir,
    ]  # fmt: skip
    log = (tmp_path / "head.log").open("wb")
    # Its own session, so teardown can stop the head and every Ray process it started at once.
    head = subprocess.Popen(
        [str(c) for c in cmd], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{dashboard}"
    from ray.job_submission import JobSubmissionClient

    deadline = time.time() + 90
    client = None
    while time.time() < deadline:
        try:
            client = JobSubmissionClient(url)
            client.list_jobs()
            break
        except Exception:
            client = None
            time.sleep(1)
    try:
        if client is None:
            pytest.fail(f"Ray head did not come up: {(tmp_path / 'head.log').read_text()[-2000:]}")
        yield client
    finally:
        head.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # whatever of the head's session is still running
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_ray_job_submit_runs_the_evaluation(ray_head, tiny_data, tmp_path):
    from ray.job_submission import JobStatus

    out = tmp_path / "submitted"
    config = tmp_path / "job.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data": {"source": tiny_data},
                "methods": ["bm25"],
                "retrieval_only": True,
                "engine": "ray",
                "out": str(out),
                "ray": {"retrieve_block_rows": 8},
            }
        )
    )
    job = ray_head.submit_job(
        entrypoint=f"python -m ray_jobs.evaluate --config {config}",
        runtime_env={
            "working_dir": str(ROOT),
            "excludes": [".venv", ".git", "runs", ".pytest_cache", ".ruff_cache", ".hypothesis", "*.egg-info"],
            "env_vars": {"T2RAG_CACHE": os.environ["T2RAG_CACHE"], "HF_HUB_OFFLINE": "1"},
        },
    )
    deadline = time.time() + 300
    status = ray_head.get_job_status(job)
    while status not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED} and time.time() < deadline:
        time.sleep(2)
        status = ray_head.get_job_status(job)
    logs = ray_head.get_job_logs(job)
    assert status == JobStatus.SUCCEEDED, logs[-3000:]
    import json

    summary = json.loads((out / "summary.json").read_text())
    assert summary["methods"]["bm25"]["weighted"]["questions"] == 33
    assert '"bm25"' in logs  # the job printed its JSON summary
