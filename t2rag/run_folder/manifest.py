"""The run manifest's contents: what ran, with which versions, on what hardware, and how long each stage took
(`t2rag.run_folder.files` writes and reads it)."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from t2rag.generation.registry import engine_named

PACKAGES = (
    "t2rag",
    "ray",
    "lancedb",
    "sentence-transformers",
    "transformers",
    "torch",
    "pyarrow",
    "numpy",
    "rank-bm25",
)


def package_versions(engine_packages: tuple[str, ...] = ()) -> dict[str, str]:
    """The installed versions of the packages every run uses and of those its generator's engine declares."""
    out = {}
    for name in dict.fromkeys([*PACKAGES, *engine_packages]):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None


def hardware() -> dict[str, object]:
    info: dict[str, object] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    with contextlib.suppress(ValueError, OSError, AttributeError):
        info["memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    gpus = gpu_names()
    if gpus:
        info["gpus"] = gpus
    return info


def gpu_names() -> list[str]:
    """The GPUs this process sees: torch's names where a stage has imported torch, else nvidia-smi's (importing
    torch only to ask took 3 s of a scripted run's 10). Empty without a GPU."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    command = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        if not visible.strip():
            return []
        command.append(f"--id={visible}")
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in result.stdout.splitlines() if line.strip()] if result.returncode == 0 else []


def build_manifest(
    config: dict, fingerprint: str, stages: list[dict], totals: dict, tokens: dict, started: float
) -> dict:
    return {
        "config": config,
        "fingerprint": fingerprint,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "wall_s": round(time.time() - started, 2),
        "versions": package_versions(_engine_packages(config)),
        "git_commit": git_commit(),
        "hardware": hardware(),
        "stage_totals_s": totals,
        "stages": stages,
        "tokens": tokens,
    }


def _engine_packages(config: dict) -> tuple[str, ...]:
    generator = config.get("generator")
    return engine_named(generator["engine"]).packages if generator else ()
