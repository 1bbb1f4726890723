"""A `t2rag eval` with a `tracking:` block logged to a real `mlflow server`, read back over its REST API."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from t2rag.cli import main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}", "--artifacts-destination",
         str(tmp_path / "artifacts"), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    pytest.fail("mlflow server did not start")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _post(url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"{url}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_an_eval_with_a_tracking_block_is_one_mlflow_run_on_the_server(mlflow_server, tiny_data, tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps({
        "name": "tracked", "data": {"source": tiny_data}, "methods": ["bm25"], "retrieval_only": True,
        "out": str(tmp_path / "run"), "tracking": {"mlflow": {"uri": mlflow_server, "experiment": "t2rag-test"}},
    }))  # fmt: skip
    assert main(["eval", "--config", str(config), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    with urllib.request.urlopen(f"{mlflow_server}/api/2.0/mlflow/experiments/get-by-name?experiment_name=t2rag-test",
                                timeout=10) as response:  # fmt: skip
        experiment_id = json.load(response)["experiment"]["experiment_id"]
    runs = _post(mlflow_server, "/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment_id]})["runs"]
    assert [r["info"]["run_id"] for r in runs] == [result["mlflow_run_id"]]
    data = runs[0]["data"]
    metrics = {m["key"]: m["value"] for m in data["metrics"]}
    assert metrics["bm25.weighted.mrr_at_3"] == pytest.approx(result["methods"]["bm25"]["weighted"]["mrr@3"])
    params = {p["key"]: p["value"] for p in data["params"]}
    assert params["methods"] == "bm25" and params["retrieval.k"] == "3"
    tags = {t["key"]: t["value"] for t in data["tags"]}
    assert tags["t2rag.runner"] == "local" and tags["mlflow.runName"] == "tracked"
    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_server)  # the artifacts went through the server's artifact proxy
    assert {"config.json", "result.json"} <= {a.path for a in client.list_artifacts(result["mlflow_run_id"])}
