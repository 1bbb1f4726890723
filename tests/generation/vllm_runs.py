"""A small real evaluation for the vLLM tests: its config and `t2rag eval` in a fresh process, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import yaml

METHODS = ["pretrained_only", "oracle", "base"]
MAX_TOKENS = 48  # room for the copied answer of test_vllm_cpu.py, also when the JSON is indented


def run_config(data: str, out: Path, generator: dict, runner: str, system_prompt: str) -> Path:
    """A config of METHODS on a seeded sample (2 questions per subset), written beside `out`; its path."""
    config = {
        "data": {"source": data},
        "methods": METHODS,
        "runner": runner,
        "limit": 2,
        "seed": 0,
        # The hashing embedder: dense retrieval on LanceDB without a model, so the only model loaded is vLLM's.
        "retrieval": {"k": 2, "embedder": {"model": "hashing"}},
        # Short prompts: vLLM's CPU build prefills about 80 tokens/s on this 2-core machine (no AVX-512).
        "prompts": {"max_context_chars": 300, "answer_system": system_prompt},
        "generator": {**generator, "sampling": {"max_tokens": MAX_TOKENS}},
        "ray": {"num_cpus": 12, "num_gpus": 1, "block_rows": 4},
        "out": str(out),
    }
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def evaluate(config: Path) -> dict:
    """`t2rag eval --config CONFIG --json` in a fresh process; its result."""
    command = [sys.executable, "-m", "t2rag.cli", "eval", "--config", str(config), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def records(out: Path) -> dict[tuple[str, str], dict]:
    from t2rag.run_folder.files import read_records

    table = read_records(str(out), None)
    table = table.filter(pc.invert(pc.is_null(table.column("raw_output"))))
    return {(r["method"], r["id"]): r for r in table.to_pylist()}
