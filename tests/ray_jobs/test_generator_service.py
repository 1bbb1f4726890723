"""The run's generator service under faults: an engine that fails some requests, and one that stops answering.

The engine is the project's OpenAI-compatible HTTP generator against a small server in this test process that
answers every prompt with the same JSON answer, and injects the fault it is told to.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler

import pyarrow.compute as pc
import pytest

from ray_jobs.evaluate import run_ray
from t2rag.config import load_config
from t2rag.run_folder.files import read_records
from tests.conftest import HASHING
from tests.scripted_server import LoopbackServer, send_json

pytestmark = pytest.mark.slow

ANSWER = json.dumps({"reasoning_steps": ["add"], "final_formula": "1 + 1", "computed_formula": "2"})


class FaultyServer:
    """A chat-completions server: `fail_first` makes the first request of every distinct prompt answer HTTP 500;
    `hang_first` makes the very first request of all wait (without answering) for `hang_s` seconds."""

    def __init__(self, fail_first: bool = False, hang_first: bool = False, hang_s: float = 600.0):
        self.seen: dict[str, int] = {}
        self.calls = 0
        self.lock = threading.Lock()
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = json.dumps(body["messages"])
                with server.lock:
                    server.calls += 1
                    first_call = server.calls == 1
                    server.seen[key] = server.seen.get(key, 0) + 1
                    first_of_prompt = server.seen[key] == 1
                if hang_first and first_call:
                    server.release.wait(hang_s)
                if fail_first and first_of_prompt:
                    self.send_response(500)
                    self.end_headers()
                    self.wfile.write(b"injected fault")
                    return
                reply = {
                    "choices": [{"message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                }
                send_json(self, reply)

        self.httpd = LoopbackServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()


def _config(tiny_data, out, base_url, **ray):
    return load_config(
        None,
        {
            "data": {"source": tiny_data},
            "methods": ["oracle"],
            "limit": 3,
            "runner": "ray",
            "out": str(out),
            "generator": {
                "engine": "openai",
                "model": "faulty",
                "base_url": base_url,
                "max_retries": 0,
                "json_mode": "none",
                "concurrency": 2,
                "batch_size": 3,
            },
            "ray": {"block_rows": 3, **ray},
        },
    )


def test_rows_whose_generation_failed_are_retried_and_end_correct(ray_local, tiny_data, tmp_path):
    """The first request of every prompt fails (HTTP 500): the first attempt records those rows as failed, the
    next attempt releases and computes them again, and the run ends with every row answered once."""
    with FaultyServer(fail_first=True) as url:
        summary = run_ray(_config(tiny_data, tmp_path / "run", url))
    records = read_records(str(tmp_path / "run"))
    assert records.num_rows == 6 and len(set(records.column("id").to_pylist())) == 6
    assert records.column("generation_error").null_count == 6
    assert all(p == 2.0 for p in records.column("prediction").to_pylist())
    assert summary["attempts"]["retried"] == 6 and summary["attempts"]["still_failed"] == 0
    assert summary["attempts"]["attempts"] == 2


def test_a_generator_that_stops_answering_is_detected_in_time(ray_local, tiny_data, tmp_path, caplog):
    """The engine's first call never returns: after `engine_timeout_s` the replica counts as hung, is restarted,
    and the batch goes again; the run finishes instead of waiting on it. Nothing else may end the wait: the server
    holds the call an hour and the HTTP client would wait as long."""
    started = time.monotonic()
    with FaultyServer(hang_first=True, hang_s=3600) as url:
        config = _config(tiny_data, tmp_path / "run", url, engine_timeout_s=8.0)
        config = config.model_copy(update={"generator": config.generator.model_copy(update={"timeout_s": 3600.0})})
        summary = run_ray(config)
    assert time.monotonic() - started < 200
    records = read_records(str(tmp_path / "run"))
    assert records.num_rows == 6 and records.column("generation_error").null_count == 6
    assert summary["attempts"]["still_failed"] == 0


def test_every_phase_shares_one_load_of_the_generator(ray_local, tiny_data, short_system_prompt, tmp_path):
    """Context summaries (every corpus), HyDE's documents and the answers of five methods: llama.cpp is loaded
    once for the whole run, where each phase used to start an engine of its own. Dense retrieval embeds with the
    hashing embedder (no model), so the loads counted are the generator's alone."""
    methods = ["pretrained_only", "oracle", "base", "hyde", "sumcontext"]
    config = load_config(
        None,
        {
            "data": {"source": tiny_data},
            "methods": methods,
            "limit": 1,
            "runner": "ray",
            "out": str(tmp_path / "run"),
            "retrieval": {"index_uri": str(tmp_path / "lancedb"), **HASHING},
            "generator": {"preset": "smollm2-135m", "n_ctx": 4096, "sampling": {"max_tokens": 8}},
            "prompts": {  # few tokens in and out: the loads are what is counted, not the texts
                "max_context_chars": 200,
                "hyde_max_tokens": 16,
                "summary_max_tokens": 16,
                "answer_system": short_system_prompt,
            },
            "ray": {"block_rows": 4},
        },
    )
    summary = run_ray(config)
    assert summary["model_loads"] == {"smollm2-135m": 1}
    records = read_records(str(tmp_path / "run"))
    generated = records.filter(pc.is_valid(records.column("raw_output")))
    assert sorted(set(generated.column("method").to_pylist())) == sorted(methods)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model_loads"] == summary["model_loads"]
