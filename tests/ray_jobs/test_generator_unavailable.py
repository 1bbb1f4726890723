"""A run whose generator can never come back ends within `ray.generator_restart_s` with one line that says so.

The kept `worker_nodes` cluster with one worker left: a head with no CPUs and one worker (8 CPUs, 1 declared GPU) on
loopback; while the generator replica holds a batch, the worker goes (no graceful shutdown) and none replaces it, so
no node can hold a replica again. The run (through `ray_jobs.evaluate`'s entry point, as `ray job submit` runs it)
must exit 2 with one error line naming what a replica needs, instead of waiting forever. The scripted
OpenAI-compatible server answers, each answer taking 2 s: what is tested is a replica that cannot come back, not a
model's answer.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
import traceback

import pytest
import yaml

from ray_jobs import evaluate
from tests.ray_jobs.test_node_loss import _overrides, _worker_holding_the_generator

pytestmark = pytest.mark.slow


def test_a_generator_that_cannot_come_back_ends_the_run_with_one_line(
    worker_nodes, tiny_data, tmp_path, recorded_services, answering_slowly
):
    nodes = worker_nodes.exactly(1)
    # A sampling seed no other run uses: nothing is in the session's generation cache, so the replica must generate.
    overrides = _overrides(tiny_data, tmp_path / "run", tmp_path / "index", 5404, True, generator=answering_slowly,
                           generator_restart_s=15)  # fmt: skip
    # bm25 and oracle only: what is tested is a replica that cannot come back, not dense retrieval (whose embedding
    # and tokenizing actors, MiniLM in each, run on this cluster shape in test_cluster.py)
    overrides.update(methods=["bm25", "oracle"], retrieval_only_methods=["bm25"])
    config_path = tmp_path / "run.yaml"
    config_path.write_text(yaml.safe_dump(overrides), encoding="utf-8")
    stderr, code = io.StringIO(), {}

    def run() -> None:
        with contextlib.redirect_stderr(stderr):
            code["exit"] = evaluate.main(["--config", str(config_path)])

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    lost = _worker_holding_the_generator(nodes, "mid_batch", recorded_services, time.monotonic() + 300)
    nodes.remove_worker(lost)
    removed = time.monotonic()
    thread.join(timeout=240)
    if thread.is_alive():
        stack = "".join(traceback.format_stack(sys._current_frames()[thread.ident]))
        pytest.fail(f"the run waited on a generator that could not come back:\n{stack}\n{stderr.getvalue()[-3000:]}")
    elapsed = time.monotonic() - removed
    lines = [line for line in stderr.getvalue().splitlines() if line.startswith("ray_jobs.evaluate: error:")]
    assert code["exit"] == 2 and len(lines) == 1, stderr.getvalue()[-3000:]
    assert "GeneratorUnavailable" in lines[0] and "came back within 15 s" in lines[0], lines[0]
    assert "has the 1 CPU and 0 GPU a replica needs" in lines[0], lines[0]
    assert elapsed < 150
    print(f"\nno generator can come back: the run ended {elapsed:.0f} s after the last worker went:\n{lines[0]}")
