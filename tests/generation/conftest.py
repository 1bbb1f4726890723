"""Servers on loopback for the generation tests: llama.cpp's OpenAI-compatible server and fault injectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from tests.conftest import free_port
from tests.scripted_server import LoopbackServer


@pytest.fixture(scope="session")
def llama_server(smollm2_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of `python -m llama_cpp.server` serving SmolLM2 on a free loopback port."""
    pytest.importorskip("llama_cpp.server.app")
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", smollm2_path, "--host", "127.0.0.1",
        "--port", str(port), "--n_ctx", "4096", "--n_threads", str(min(2, os.cpu_count() or 1)),
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_ready(process, base_url, log_path.read_text, timeout_s=60)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_ready(process: subprocess.Popen, base_url: str, read_log, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama.cpp server exited with {process.returncode}:\n{read_log()[-2000:]}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"llama.cpp server not ready after {timeout_s} s:\n{read_log()[-2000:]}")


def chat_reply(text: str = "ok", prompt_tokens: int = 7, completion_tokens: int = 2) -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass
class FaultServer:
    """A chat-completion endpoint that fails in a chosen way the first `failures` times (-1: always)."""

    mode: str = "ok"  # "429", "503", "400", "slow" or "ok"
    failures: int = 0
    sleep_s: float = 0.0
    calls: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[dict] = field(default_factory=list)
    base_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self, mode: str, failures: int = -1, sleep_s: float = 0.0) -> FaultServer:
        with self.lock:
            self.mode, self.failures, self.sleep_s = mode, failures, sleep_s
            self.calls = 0
            self.headers.clear()
            self.bodies.clear()
        return self

    def respond(self, headers: dict[str, str], body: dict) -> tuple[int, dict[str, str], dict]:
        with self.lock:
            self.calls += 1
            self.headers.append(headers)
            self.bodies.append(body)
            failing = self.failures < 0 or self.calls <= self.failures
            mode, sleep_s = self.mode, self.sleep_s
        if mode == "slow":
            time.sleep(sleep_s)
        elif failing and mode == "429":
            return 429, {"Retry-After": "0"}, {"error": {"message": "rate limited"}}
        elif failing and mode == "503":
            return 503, {}, {"error": {"message": "overloaded"}}
        elif failing and mode == "400":
            return 400, {}, {"error": {"message": "bad request: unknown field"}}
        last = body.get("messages", [{}])[-1].get("content", "")
        return 200, {}, chat_reply(f"echo: {last}")


@pytest.fixture(scope="session")
def _fault_server_session() -> Iterator[FaultServer]:
    state = FaultServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            status, extra, reply = state.respond(dict(self.headers.items()), body)
            data = json.dumps(reply).encode()
            try:
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = LoopbackServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fault_server(_fault_server_session: FaultServer) -> FaultServer:
    """The fault-injecting server, reset to answer normally."""
    return _fault_server_session.configure("ok", failures=0)
