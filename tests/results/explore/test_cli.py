"""`t2rag explore` as a person starts it: one line with the address, a page and its JSON there, Ctrl-C ends it."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx


def test_explore_prints_where_it_listens_and_serves_the_run(scripted_run):
    cmd = [sys.executable, "-m", "t2rag.cli", "explore", scripted_run, "--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # blocks until it listens (or exits)
        assert line.startswith(f"t2rag explore: {scripted_run} at http://127.0.0.1:"), (line, proc.stderr.read())
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        assert "<title>t2rag explore</title>" in httpx.get(url, timeout=30).text
        overview = httpx.get(f"{url}api/overview", timeout=30).json()
        assert sorted(overview["methods"]) == ["bm25", "bm25_meta", "oracle", "pretrained_only"]
        assert httpx.get(f"{url}api/question/FinQA/nope", timeout=30).status_code == 404
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) in (0, 130)
    missing = subprocess.run([*cmd[:4], "/nonexistent/run"], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.strip() == (
        "t2rag: error: /nonexistent/run: no records found under /nonexistent/run/records"
    )
