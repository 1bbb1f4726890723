"""Run on every node at setup (`cluster.yaml`): this node's Python, Ray and vLLM are the installed project's pins.

    python -m ray_jobs.node_check

Exits 0 and prints the versions, or exits 1 with one line per mismatch, so `ray up` stops at the node that would
otherwise fail minutes into a job.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ray_jobs.cluster_file import ProjectPins


def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def node_problems(pins: ProjectPins, python: str, versions: dict[str, str | None]) -> list[str]:
    """What differs between this node and the project's pins."""
    problems = []
    if Version(python) not in SpecifierSet(pins.requires_python):
        problems.append(f"Python {python} does not satisfy the project's requires-python {pins.requires_python}")
    for name, pinned in (("ray", pins.ray), ("vllm", pins.vllm)):
        if pinned and versions.get(name) != pinned:
            problems.append(f"{name} {versions.get(name) or 'is not installed'}; the project pins {name}=={pinned}")
    return problems


def main() -> int:
    python = platform.python_version()
    versions = {name: installed_version(name) for name in ("ray", "vllm", "t2rag")}
    problems = node_problems(ProjectPins.installed(), python, versions)
    for problem in problems:
        print(f"t2rag node check: {problem}", file=sys.stderr)
    if not problems:
        print(f"t2rag node check: Python {python}, " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
