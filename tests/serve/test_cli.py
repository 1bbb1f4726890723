"""`t2rag serve`: argument wiring, and a real foreground run that Ctrl-C (SIGINT) shuts down cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
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


@pytest.mark.slow
def test_foreground_run_serves_until_interrupted(tmp_path):
    from tests.conftest import real_table, write_layout

    data = write_layout(tmp_path / "sample", {"FinQA": real_table("FinQA").slice(0, 40)})
    config = tmp_path / "run.yaml"
    config.write_text(f"data: {{source: {data}}}\nmethods: [bm25]\n")
    port = free_port()
    command = [sys.executable, "-m", "t2rag.cli", "serve", "--config", str(config), "--generator", "none"]
    command += ["--port", str(port)]
    log = (tmp_path / "serve.log").open("w+")
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while f"serving on http://127.0.0.1:{port}" not in Path(log.name).read_text():  # printed once it is up
            assert process.poll() is None, f"exited early:\n{Path(log.name).read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"not up after 150 s:\n{Path(log.name).read_text()[-3000:]}"
            time.sleep(1)
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json() == {"status": "ok"}
        body = {"question": "What was the change in net revenue?", "method": "bm25", "k": 2}
        response = httpx.post(f"http://127.0.0.1:{port}/retrieve", json=body, timeout=30)
        assert response.status_code == 200 and len(response.json()["contexts"]) == 2
        methods = httpx.get(f"http://127.0.0.1:{port}/methods", timeout=30).json()
        assert [m["name"] for m in methods["methods"]] == ["bm25"] and methods["generator"] is None

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        output = Path(log.name).read_text()
        assert "shutting down" in output and "Traceback" not in output
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
