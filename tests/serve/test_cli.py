"""`t2rag serve`: argument wiring, the exposure warning, and real foreground runs: ready when the URL is printed, an
API key, a loopback-only Ray cluster, and no Ray process left after SIGTERM or after the command is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from t2rag.cli import build_parser
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_serve_command_passes_its_flags_to_run_foreground(monkeypatch):
    import serve.app

    seen = {}
    monkeypatch.setattr(serve.app, "run_foreground", lambda **kwargs: seen.update(kwargs) or 0)
    args = build_parser().parse_args(["serve", "--data", "/d", "--port", "8123", "--generator", "none"])
    assert args.func(args) == 0
    assert seen == {"config_path": None, "data": "/d", "host": "127.0.0.1", "port": 8123, "generator": "none"}


def test_a_bad_config_fails_before_ray_starts(tmp_path, capsys):
    from t2rag.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text("methods: [nope]\n")
    assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("t2rag: error:") and "nope" in err and "\n" not in err


def test_listening_beyond_loopback_warns(tmp_path, capsys, monkeypatch):
    import ray

    import serve.app

    class Stop(Exception):
        pass

    def refuse(*args, **kwargs):
        raise Stop

    monkeypatch.delenv("T2RAG_API_KEY", raising=False)
    monkeypatch.setattr(serve.app, "init_ray", refuse)
    monkeypatch.setattr(serve.app, "stop_local_cluster", lambda: None)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(Stop):
        serve.app.run_foreground(None, None, "0.0.0.0", free_port(), "none")
    err = capsys.readouterr().err
    assert "warning: listening on 0.0.0.0 exposes the API" in err and "T2RAG_API_KEY" in err


KEY = "test-key-123"


def _start(tmp_path: Path) -> tuple[subprocess.Popen, int, Path]:
    """`t2rag serve` in its own process group on 40 FinQA questions with bm25 and an API key; returns once it
    printed its URL."""
    from tests.conftest import real_table, write_layout

    data = write_layout(tmp_path / "sample", {"FinQA": real_table("FinQA").slice(0, 40)})
    config = tmp_path / "run.yaml"
    config.write_text(f"data: {{source: {data}}}\nmethods: [bm25]\n")
    port = free_port()
    command = [sys.executable, "-m", "t2rag.cli", "serve", "--config", str(config), "--generator", "none"]
    command += ["--port", str(port)]
    log = tmp_path / "serve.log"
    env = {**os.environ, "T2RAG_API_KEY": KEY}
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    deadline = time.monotonic() + 150
    while f"serving on http://127.0.0.1:{port}" not in log.read_text():  # printed once every deployment is ready
        if process.poll() is not None or time.monotonic() > deadline:
            _kill(process)
            pytest.fail(f"not up (exit {process.poll()}):\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    return process, port, log


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _still_running(processes: list[psutil.Process], timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not left or time.monotonic() > deadline:
            return [f"{p.pid} {p.name()}" for p in left]
        time.sleep(0.5)


@pytest.mark.slow
def test_serve_is_ready_when_it_says_so_and_sigterm_stops_everything(tmp_path):
    process, port, log = _start(tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        ray_processes = psutil.Process(process.pid).children(recursive=True)
        assert len(ray_processes) >= 4  # GCS, raylet, agents, workers
        # Ready as soon as the URL is printed: the first request is answered, not timed out.
        assert httpx.get(f"{url}/ready", timeout=10).json()["status"] == "ready"
        body = {"question": "What was the change in net revenue?", "method": "bm25", "k": 2}
        auth = {"Authorization": f"Bearer {KEY}"}
        response = httpx.post(f"{url}/retrieve", json=body, headers=auth, timeout=30)
        assert response.status_code == 200 and len(response.json()["contexts"]) == 2
        assert httpx.post(f"{url}/retrieve", json=body, timeout=30).status_code == 401
        assert httpx.get(f"{url}/health", timeout=10).json() == {"status": "ok"}  # probes need no key
        methods = httpx.get(f"{url}/methods", headers=auth, timeout=30).json()
        assert [m["name"] for m in methods["methods"]] == ["bm25"] and methods["generator"] is None
        # The local Ray cluster listens on loopback only, except Serve replicas' inter-deployment gRPC server, which
        # Ray 2.60 binds to [::] unconditionally (ray/serve/_private/replica.py).
        names = {p.pid: p.name() for p in ray_processes}
        listening = [
            (c.laddr.ip, names[c.pid])
            for c in psutil.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.pid in names
        ]
        beyond = {name for ip, name in listening if ip not in ("127.0.0.1", "::ffff:127.0.0.1")}
        assert len(listening) > 5 and all(name.startswith("ray::ServeReplica") for name in beyond), listening

        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        output = log.read_text()
        assert "shutting down" in output and "Traceback" not in output
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=2)
        assert _still_running(ray_processes, timeout_s=10) == []
    finally:
        _kill(process)


@pytest.mark.slow
def test_a_killed_serve_command_leaves_no_ray_process(tmp_path):
    process, _, _ = _start(tmp_path)
    try:
        ray_processes = psutil.Process(process.pid).children(recursive=True)
        os.kill(process.pid, signal.SIGKILL)  # the driver alone: no chance to shut anything down
        process.wait()
        assert _still_running(ray_processes, timeout_s=30) == []
    finally:
        _kill(process)
