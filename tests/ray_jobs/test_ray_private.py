"""Ray's private modules: used in one module only, each name still where it was, and the dependency bounded above by
the versions that module was tested with."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
from pathlib import Path

import pytest

from ray_jobs.ray_private import PRIVATE_NAMES, TESTED_WITH

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module", sorted(PRIVATE_NAMES))
def test_each_private_name_is_where_ray_ray_private_expects_it(module):
    imported = importlib.import_module(module)
    missing = [name for name in PRIVATE_NAMES[module] if not hasattr(imported, name)]
    assert not missing, f"Ray moved {module}.{missing}: update ray_jobs/ray_private.py and its tested versions"


def test_no_other_module_of_the_project_imports_ray_s_private_modules():
    users = set()
    for package in ("t2rag", "ray_jobs", "serve", "bench", "tests"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if any(n.startswith("ray") and "._private" in n for n in names):
                    users.add(path.relative_to(ROOT).as_posix())
    assert users == {"ray_jobs/ray_private.py"}


def test_the_ray_dependency_is_bounded_by_the_tested_versions():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (ray,) = [d for d in project["dependencies"] if d.startswith("ray[")]
    upper = re.search(r"<\s*([\d.]+)", ray)
    assert upper is not None, f"{ray}: no upper bound"
    newest = max(TESTED_WITH, key=lambda v: tuple(map(int, v.split("."))))
    major, minor = map(int, newest.split("."))
    assert upper.group(1) == f"{major}.{minor + 1}", f"{ray}: bound it below the next untested minor version"
    installed = importlib.import_module("ray").__version__
    assert installed.rsplit(".", 1)[0] in TESTED_WITH
