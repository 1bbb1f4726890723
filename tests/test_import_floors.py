"""The packages' floors only import downward (bench/import_graph.py), and the check sees an import that does not."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def graph(root: Path) -> dict:
    command = [sys.executable, str(ROOT / "bench" / "import_graph.py"), "--root", str(root), "--json"]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def test_no_circles_no_climbs_and_every_module_on_a_floor():
    result = graph(ROOT)
    assert result["modules"] > 100
    assert (result["circles"], result["package_circles"], result["climbs"], result["unlayered"]) == ([], [], [], [])


def test_an_upward_import_and_the_circle_it_closes_are_found(tmp_path):
    for package in ("t2rag", "ray_jobs", "serve"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("sample", "__pycache__"))
    load = tmp_path / "t2rag" / "data" / "load.py"
    load.write_text(load.read_text() + "\n\ndef _late():\n    from t2rag.resources import Resources\n")
    result = graph(tmp_path)
    assert "t2rag.data.load (layer 1) -> t2rag.resources (layer 4)" in result["climbs"]
    assert any({"t2rag.data.load", "t2rag.resources"} <= set(group) for group in result["circles"])
