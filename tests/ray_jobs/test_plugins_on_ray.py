"""Plugins on a multi-node Ray cluster started with Ray's own `ray start`: a head with no CPUs and two workers, none
of which has the example package installed or the plugin module on its path. t2rag ships them with the job."""

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ray_jobs.ray_private import LOOPBACK_ENV
from tests.conftest import PLUGIN_MODULES, free_port, t2rag, with_example

pytestmark = pytest.mark.slow


@dataclass
class Nodes:
    address: str  # the head's GCS, for `ray.address`
    dashboard: str  # for `ray job submit`


def _ray(*argv: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    command = [str(Path(sys.executable).parent / "ray"), *argv, "--block", "--disable-usage-stats"]
    return subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module")
def three_nodes(cluster_keeper, tmp_path_factory) -> Iterator[Nodes]:
    """A head (0 CPUs: every actor and task runs on a worker) and two workers of 2 CPUs, each `ray start --block`
    in a session of its own; their environment has no plugin on PYTHONPATH."""
    cluster_keeper.close()  # never two clusters at once
    logs = tmp_path_factory.mktemp("nodes")
    port, dashboard = free_port(), free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # socket paths stay under 107 bytes
    # Neither the plugins' path nor the flag an earlier test's one-process cluster set (which makes a joining node
    # refuse to start, as on macOS).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", LOOPBACK_ENV)}
    env.update(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", RAY_AUTH_MODE="disabled")
    store = str(200 * 2**20)
    nodes = [_ray("start", "--head", "--port", str(port), "--num-cpus", "0", "--temp-dir", temp_dir,
                  "--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard),
                  "--object-store-memory", store, env=env, log=logs / "head.log")]  # fmt: skip
    try:
        address = f"127.0.0.1:{port}"
        _wait_for(lambda: _alive(address, env) >= 1, logs / "head.log")
        for i in (1, 2):  # one after another: two raylets starting at once on two cores time out
            nodes.append(_ray("start", "--address", address, "--num-cpus", "2", "--object-store-memory", store,
                              env=env, log=logs / f"worker{i}.log"))  # fmt: skip
            _wait_for(lambda n=1 + i: _alive(address, env) == n, logs / f"worker{i}.log")
        yield Nodes(address, f"http://127.0.0.1:{dashboard}")
    finally:
        for node in reversed(nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGTERM)
        for node in reversed(nodes):
            try:
                node.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _alive(address: str, env: dict[str, str]) -> int:
    script = (f"import ray; ray.init(address={address!r}, logging_level='ERROR'); "
              "print(sum(n['Alive'] for n in ray.nodes()))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    return int(done.stdout.strip() or 0) if done.returncode == 0 else 0


def _wait_for(ready, log: Path, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if ready():
            return
        time.sleep(1)
    pytest.fail(f"the cluster did not come up: {log.read_text()[-2000:]}")


def _config(path: Path, **fields) -> Path:
    base = {"retrieval_only": True, "data": {"subsets": ["FinQA"]}, "ray": {"retrieve_block_rows": 256}}
    path.write_text(yaml.safe_dump({**base, **fields}))
    return path


def _result(run: Path) -> dict:
    return json.loads((run / "result.json").read_text())


def test_the_installed_example_is_shipped_to_nodes_that_do_not_have_it(three_nodes, example_installed, tmp_path):
    env = with_example(example_installed)
    methods = ["bm25_focus", "char_tfidf", "tfidf_focus"]
    here, there = tmp_path / "here", tmp_path / "there"
    done = t2rag("eval", "--config", str(_config(tmp_path / "local.yaml", methods=methods, out=str(here))),
                 cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    on_ray = _config(tmp_path / "ray.yaml", methods=methods, out=str(there), runner="ray",
                     ray={"address": three_nodes.address, "retrieve_block_rows": 256})  # fmt: skip
    done = t2rag("eval", "--config", str(on_ray), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _result(there)["plugins"] == _result(here)["plugins"]
    for method in methods:  # the same figures as in one process
        assert _result(there)["methods"][method]["weighted"] == _result(here)["methods"][method]["weighted"]
    assert json.loads((there / "manifest.json").read_text())["runner"] == "ray"


def test_a_module_beside_its_config_runs_on_the_nodes_and_through_ray_job_submit(three_nodes, tmp_path):
    folder = tmp_path / "experiment"
    folder.mkdir()
    shutil.copy(PLUGIN_MODULES / "word_overlap.py", folder)
    fields = {"plugins": ["word_overlap"], "settings": {"word_overlap": {"min_length": 4}}, "methods": ["overlap"],
              "runner": "ray"}  # fmt: skip
    run = tmp_path / "run"
    config = _config(folder / "overlap.yaml", **fields, out=str(run),
                     ray={"address": three_nodes.address, "retrieve_block_rows": 256})  # fmt: skip
    done = t2rag("eval", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _result(run)["plugins"]["stages"] == {"fold_questions": {"source": "word_overlap", "version": "0.2.0"}}
    assert "[fold_questions] rows=883" in done.stderr  # the plugin's stage ran on the workers' actors

    # The same folder as a job's working_dir: its driver runs on the head, finds the module beside the config and
    # ships it to the workers' actors.
    submitted = tmp_path / "submitted"
    _config(folder / "job.yaml", **fields, out=str(submitted))
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    runtime_env = {"env_vars": {"T2RAG_CACHE": os.environ["T2RAG_CACHE"], "HF_HUB_OFFLINE": "1"}}
    command = [str(Path(sys.executable).parent / "ray"), "job", "submit", "--address", three_nodes.dashboard,
               "--working-dir", str(folder), "--runtime-env-json", json.dumps(runtime_env), "--",
               sys.executable, "-m", "t2rag.cli", "eval", "--config", "job.yaml"]  # fmt: skip
    job = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, (job.stdout + job.stderr)[-3000:]
    assert _result(submitted)["methods"]["overlap"]["weighted"] == _result(run)["methods"]["overlap"]["weighted"]


def _rankings(run: Path, method: str) -> dict[str, tuple[list[str], list[float]]]:
    from t2rag.run_folder.files import read_records

    records = read_records(str(run), ["id", "method", "context_ids", "scores"]).to_pylist()
    return {r["id"]: (r["context_ids"], r["scores"]) for r in records if r["method"] == method}


def test_a_dense_plugin_and_a_reranker_rank_on_the_nodes_as_in_one_process(three_nodes, example_installed, tmp_path):
    """cosine_bonus (a module beside the config) and the example's reranker on the three nodes: the passages are
    embedded by the index phase's embedding pool into an index of the Ray run's own (nothing cached from the run in
    one process), and every question's ranking is the one-process run's: the same ids in the same order, the same
    scores (to the last bits of a float64, which a block's matrix product may round otherwise)."""
    env = with_example(example_installed)
    folder = tmp_path / "experiment"
    folder.mkdir()
    shutil.copy(PLUGIN_MODULES / "cosine_bonus.py", folder)
    fields = {"plugins": ["cosine_bonus"], "methods": ["cosine_bonus", "focus_tfidf_rerank"],
              "settings": {"cosine_bonus": {"bonus": 0.25}}}  # fmt: skip
    here, there = tmp_path / "here", tmp_path / "there"
    hashing = {"model": "hashing"}
    local = _config(folder / "local.yaml", **fields, out=str(here),
                    retrieval={"embedder": hashing, "index_uri": str(tmp_path / "index-here")})  # fmt: skip
    done = t2rag("eval", "--config", str(local), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    on_ray = _config(folder / "ray.yaml", **fields, out=str(there), runner="ray",
                     retrieval={"embedder": hashing, "index_uri": str(tmp_path / "index-there")},
                     ray={"address": three_nodes.address, "retrieve_block_rows": 256})  # fmt: skip
    done = t2rag("eval", "--config", str(on_ray), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[build_index] corpus=FinQA rows=299" in done.stderr  # embedded by the pool before retrieval began
    assert "[tfidf_rerank] rows=883" in done.stderr
    for method in fields["methods"]:  # scores to the last bits a block's matrix product may round differently
        mine, theirs = _rankings(there, method), _rankings(here, method)
        assert {q: ids for q, (ids, _) in mine.items()} == {q: ids for q, (ids, _) in theirs.items()}
        for q, (_, scores) in mine.items():
            assert scores == pytest.approx(theirs[q][1], rel=1e-12, abs=1e-12), (method, q)
