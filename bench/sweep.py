"""What a sweep saves, what a stopped sweep recomputes, and what a search finds.

    python bench/sweep.py grid      # configs/sweeps/retrieval_grid.yaml: the sweep against its 12 runs, one by one
    python bench/sweep.py resume    # the same sweep stopped by SIGINT, then its driver SIGKILLed, then rerun
    python bench/sweep.py search    # 20 Optuna trials of BM25's k1 and b on dev against BM25's defaults

Everything runs through the command line a user types (`t2rag sweep`, `t2rag eval`), on the bundled sample, with
the vector tables built beforehand by an untimed run (both sides find them). `grid` compares every trial's records
with its separate run's, record by record. Figures go to stdout; the work folder is printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "configs" / "sweeps" / "retrieval_grid.yaml"
T2RAG = [sys.executable, "-m", "t2rag.cli"]


def run(args: list[str], **kwargs) -> float:
    started = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, **kwargs)
    return time.perf_counter() - started


def records(run_dir: Path) -> list[dict]:
    from t2rag.run_folder.files import read_records

    table = read_records(str(run_dir)).sort_by([("method", "ascending"), ("id", "ascending")])
    return table.drop_columns(["generation_s"]).to_pylist()


def warm(work: Path) -> None:
    """Build the sample's vector tables (every trial of both sides then finds them)."""
    run([*T2RAG, "eval", "--config", "configs/retrieval.yaml", "--out", str(work / "warm")])


def grid(work: Path) -> None:
    from t2rag.sweep.spec import load_sweep

    warm(work)
    sweep_s = run([*T2RAG, "sweep", str(GRID), "--out", str(work / "sweep")])
    sweep = load_sweep(GRID, str(work / "sweep"))
    alone_s, equal = 0.0, 0
    for trial in sweep.trials:
        config = work / "configs" / f"{trial.name}.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        dumped = trial.config.model_dump(mode="json", exclude={"out"})
        config.write_text(yaml.safe_dump(dumped))
        alone = work / "alone" / trial.name
        alone_s += run([*T2RAG, "eval", "--config", str(config), "--out", str(alone)])
        equal += records(alone) == records(Path(trial.config.out))
    n = len(sweep.trials)
    print(
        f"grid: {n} trials: sweep {sweep_s:.1f} s (max_concurrent {sweep.spec.max_concurrent}); {n} separate "
        f"`t2rag eval` runs {alone_s:.1f} s; sweep / separate = {sweep_s / alone_s:.2f}x"
    )
    print(f"grid: trials whose records equal their separate run's, record by record: {equal} of {n}")


def finished(out: Path) -> dict[str, str]:
    """Trial name -> its manifest's start time, for trials with a result."""
    done = {}
    for trial in (out / "trials").glob("*"):
        if (trial / "result.json").exists():
            done[trial.name] = json.loads((trial / "manifest.json").read_text())["started"]
    return done


def stop_after(args: list[str], out: Path, trials: int, sig: int) -> float:
    """Start the sweep, send `sig` to its driver once `trials` more trials have finished, wait for it to end."""
    before = len(finished(out))
    started = time.perf_counter()
    driver = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=sig == signal.SIGKILL)  # fmt: skip
    while len(finished(out)) < before + trials and driver.poll() is None:
        time.sleep(0.5)
    driver.send_signal(sig)
    driver.wait()
    if sig == signal.SIGKILL:  # its local cluster outlives a killed driver, as it would for a user: stop it
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"], capture_output=True)
    return time.perf_counter() - started


def resume(work: Path) -> None:
    from t2rag.run_folder.files import read_records

    warm(work)
    out = work / "sweep"
    args = [*T2RAG, "sweep", str(GRID), "--out", str(out)]
    seconds = stop_after(args, out, 3, signal.SIGINT)
    after_int = finished(out)
    print(f"resume: SIGINT after {seconds:.1f} s with {len(after_int)} trials finished")
    seconds = stop_after(args, out, 3, signal.SIGKILL)
    after_kill = finished(out)
    print(f"resume: SIGKILL of the driver after {seconds:.1f} s with {len(after_kill)} trials finished")
    seconds = run(args)
    done = finished(out)
    recomputed = [name for name, at in after_kill.items() if done.get(name) != at]
    duplicates = 0
    for trial in (out / "trials").glob("*"):
        table = read_records(str(trial))
        duplicates += table.num_rows - len(set(zip(*[table.column(c).to_pylist() for c in ("method", "id")],
                                                   strict=True)))  # fmt: skip
    print(
        f"resume: the rerun took {seconds:.1f} s; {len(done)} trials finished; finished trials recomputed: "
        f"{len(recomputed)}; duplicated records: {duplicates}"
    )


def search(work: Path) -> None:
    warm(work)
    base = {"extends": str(ROOT / "configs" / "retrieval.yaml"), "methods": ["bm25"], "data": {"split": "dev"}}
    space = {"retrieval.bm25.k1": {"low": 0.2, "high": 3.0}, "retrieval.bm25.b": {"low": 0.0, "high": 1.0}}
    path = work / "search.yaml"
    path.write_text(yaml.safe_dump({"name": "bm25_search", "base": base, "out": str(work / "search"),
                                    "search": {"algorithm": "optuna", "trials": 20, "seed": 0, "space": space},
                                    "objective": {"metric": "mrr@3", "mode": "max"}, "max_concurrent": 2}))  # fmt: skip
    seconds = run([*T2RAG, "sweep", str(path)])
    table = json.loads((work / "search" / "table.json").read_text())
    best = next(r for r in table["rows"] if r["trial"] == table["best"])
    default = work / "default"
    run([*T2RAG, "eval", "--config", "configs/retrieval.yaml", "--methods", "bm25", "--split", "dev",
         "--out", str(default)])  # fmt: skip
    plain = json.loads((default / "result.json").read_text())["methods"]["bm25"]["weighted"]["mrr@3"]
    test = table["best_vs_runner_up"] or {}
    print(
        f"search: 20 Optuna trials in {seconds:.1f} s; best {best['trial']}: MRR@3 {best['objective']:.2f} "
        f"against BM25's defaults {plain:.2f}; lead over the runner-up {test.get('diff')} points, "
        f"p = {test.get('p_value')}"
    )


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "grid"
    work = Path(tempfile.mkdtemp(prefix=f"t2rag-bench-sweep-{what}-"))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    print(f"work folder: {work}")
    {"grid": grid, "resume": resume, "search": search}[what](work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
