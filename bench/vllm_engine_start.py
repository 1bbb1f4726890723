"""How long an in-process vLLM engine takes to start, answer once and stop, with the `vllm-cpu-smollm2` preset as
shipped (`single_process: true`: the engine core and model worker in the caller's process) and with vLLM's own
processes (`single_process: false`: an engine-core process and a worker process, each importing vLLM). Each
setting runs in a fresh Python process, alternating, `--rounds` times; the medians are the figures. Run it in the
vLLM environment:

    make vllm && T2RAG_MODELS=.venv-vllm/models .venv-vllm/bin/python bench/vllm_engine_start.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRESET = "vllm-cpu-smollm2"


def one_engine(single_process: bool) -> dict[str, float | str]:
    """Start the preset's engine (with `single_process` as given), answer one question, close it: seconds each."""
    started = time.perf_counter()
    import vllm  # noqa: F401 - its import is part of what a process pays

    from t2rag.generation.base import ChatRequest, SamplingParams
    from t2rag.generation.registry import PRESETS
    from t2rag.generation.vllm_engine import VLLMGenerator

    imported = time.perf_counter()
    generator = VLLMGenerator(PRESETS[PRESET].model_copy(update={"single_process": single_process}))
    generator.load()
    loaded = time.perf_counter()
    question = ChatRequest(({"role": "user", "content": "What is 2 plus 2?"},), SamplingParams(max_tokens=8))
    [answer] = generator.generate([question])
    answered = time.perf_counter()
    generator.close()
    del generator
    closed = time.perf_counter()
    return {"import_s": imported - started, "load_s": loaded - imported, "answer_s": answered - loaded,
            "close_s": closed - answered, "text": answer.text}  # fmt: skip


def measured(single_process: bool) -> dict:
    """`one_engine` in a fresh process, with that process's whole wall time."""
    command = [sys.executable, __file__, "--one", json.dumps(single_process)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the engine failed (single_process={single_process}):\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "process_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_engine(json.loads(args.one))), flush=True)
        os._exit(0)  # vLLM's threads may outlive close(); the figures are out
    runs: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(args.rounds):
        for single in (True, False):
            runs[single].append(measured(single))
    print(f"{PRESET}, median of {args.rounds} alternating rounds, each in a fresh process:")
    print("| single_process | import s | engine start s | one answer s | close s | process s | answer |")
    print("|---|--:|--:|--:|--:|--:|---|")
    for single, rows in runs.items():
        cells = [statistics.median(r[k] for r in rows) for k in ("import_s", "load_s", "answer_s", "close_s",
                                                                    "process_s")]  # fmt: skip
        print(f"| {str(single).lower()} | " + " | ".join(f"{c:.1f}" for c in cells) + f" | {rows[0]['text']!r} |")
    same = {r["text"] for rows in runs.values() for r in rows}
    print("the same greedy answer in every run" if len(same) == 1 else f"answers differ: {sorted(same)}")


if __name__ == "__main__":
    main()
