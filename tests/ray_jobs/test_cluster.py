"""Cluster-shaped tests: a multi-node cluster with GPU-declaring workers, and `ray job submit` against a head."""

from __future__ import annotations

import contextlib
import json
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


def test_embedding_actors_run_on_the_gpu_nodes(worker_nodes, tiny_data, tmp_path):
    """all-MiniLM-L6-v2 embeds a corpus on the kept cluster of a head and two workers that declare a GPU each: one
    embedding actor per GPU node, none on the head."""
    from ray.util.state import list_actors

    from ray_jobs.build_index import embed_corpus
    from ray_jobs.table_blocks import input_tasks
    from t2rag.config import load_config
    from t2rag.resources import Resources

    nodes = worker_nodes.exactly(2)
    earlier = {a.actor_id for a in list_actors(detail=True)}  # the kept cluster's actors of earlier tests
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
    actors = [a for a in list_actors(detail=True) if "EmbedPassages" in (a.class_name or "")]
    actors = [a for a in actors if a.actor_id not in earlier]
    assert actors, "no embedding actors were recorded"
    assert {a.node_id for a in actors} <= {w.node_id for w in nodes.workers}  # never on the head
    assert len({a.node_id for a in actors}) == 2  # one actor per GPU node


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


def _submit(client, config: Path, name: str, *extra: str) -> tuple[int, str]:
    """`ray job submit` as a user runs it from the repository (this directory as the job's working_dir): its exit
    status, and the job's own log lines."""
    runtime_env = {
        "excludes": [".venv*", ".git", "runs", "mutants", ".pytest_cache", ".ruff_cache", ".hypothesis", "*.egg-info"],
        "env_vars": {"T2RAG_CACHE": os.environ["T2RAG_CACHE"], "HF_HUB_OFFLINE": "1"},
    }
    cmd = [str(Path(sys.executable).parent / "ray"), "job", "submit", "--address", client.get_address(),
           "--submission-id", name, "--working-dir", str(ROOT), "--runtime-env-json", json.dumps(runtime_env),
           "--", "python", "-m", "ray_jobs.evaluate", "--config", str(config), *extra]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return done.returncode, client.get_job_logs(name)


def _last_line(logs: str) -> str:
    return [line for line in logs.splitlines() if line.strip()][-1]


def test_ray_job_submit_keeps_results_where_they_last(ray_head, tiny_data, tmp_path):
    """A relative `out` would be written in the job's temporary copy of the working directory: refused in seconds
    with one line. A durable one holds the records where the job's last line says, and a resubmission resumes."""
    config = tmp_path / "job.yaml"
    fields = {"data": {"source": tiny_data}, "methods": ["bm25"], "retrieval_only": True, "runner": "ray",
              "out": "runs/job", "ray": {"retrieve_block_rows": 8}}  # fmt: skip
    config.write_text(yaml.safe_dump(fields))
    start = time.perf_counter()
    code, logs = _submit(ray_head, config, "relative")
    assert code != 0 and time.perf_counter() - start < 60, logs[-2000:]
    line = _last_line(logs)
    assert line.startswith("ray_jobs.evaluate: error: ConfigError: out 'runs/job' would be written inside this Ray")
    assert "s3:// prefix" in line
    assert not (ROOT / "runs/job").exists()

    out = tmp_path / "shared/runs/job"  # storage every node of this one-machine cluster shares
    code, logs = _submit(ray_head, config, "durable", "--out", str(out))
    assert code == 0, logs[-3000:]
    assert _last_line(logs) == f"ray_jobs.evaluate: results in {out} (records/, result.json; t2rag report {out})"
    result = json.loads((out / "result.json").read_text())
    assert result["methods"]["bm25"]["weighted"]["questions"] == 33
    assert "evaluate: 33 records to compute (0 already done)" in logs

    code, logs = _submit(ray_head, config, "resubmitted", "--out", str(out))
    assert code == 0, logs[-3000:]
    (again,) = [json.loads(line) for line in logs.splitlines() if line.startswith('{"methods"')]
    assert again["attempts"]["attempts"] == 0 and again["methods"] == result["methods"]  # nothing computed again
    assert json.loads((out / "result.json").read_text())["methods"] == result["methods"]
