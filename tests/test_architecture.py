"""docs/architecture.md's table of who owns which step holds every package and top-level module of the code, each on
the layer that bench/import_graph.py places it on, so the page cannot drift from the code."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from import_graph import LAYERS, layer  # noqa: E402


def documented() -> dict[str, int]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return {name: int(level) for name, level in re.findall(r"^\| `([\w.]+)` \| (\d+) \|", text, re.M)}


def code_units() -> set[str]:
    """Every package and top-level module of t2rag, the modules a layer names on their own, and the front ends."""
    units = {
        f"t2rag.{p.stem}"
        for p in (ROOT / "t2rag").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and any(p.glob("*.py")))
    }
    named = {name for names in LAYERS for name in names}
    return units | {name for name in named if name.startswith("t2rag.results.")} | {"ray_jobs", "serve"}


def test_every_package_is_on_the_page_on_its_layer():
    table = documented()
    assert set(table) == code_units()
    assert {name: layer(name) for name in table} == table


def test_the_page_names_what_exists():
    for name in documented():
        path = ROOT / name.replace(".", "/")
        assert path.is_dir() or path.with_suffix(".py").exists(), name
