"""`t2rag plan SWEEP.yaml`: the trials priced before anything loads; a sweep that cannot be placed refused."""

from __future__ import annotations

import json

import yaml

from ray_jobs.sweep_plan import slots_wall
from t2rag.cli import main


def _sweep(tmp_path, tiny_data, **base):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "priced", "out": str(tmp_path / "out"),
        "base": {"data": {"source": tiny_data}, "retrieval_only": True, **base},
        "grid": {"methods": ["bm25", "base", "hybrid_rrf"], "retrieval.k": [1, 3]}, "max_concurrent": 2,
    }))  # fmt: skip
    return path


def test_a_sweep_plan_counts_shared_work_once(tmp_path, tiny_data, capsys):
    assert main(["plan", "--config", str(_sweep(tmp_path, tiny_data)), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    rows = {r["trial"]: r for r in plan["trials"]}
    assert len(rows) == 6 and plan["refusal"] is None
    # The first dense trial embeds the passages; the other dense trials read its vector table.
    assert [n for n, r in rows.items() if r["shares_passages"]] == ["methods=base,k=3", "methods=hybrid_rrf,k=1",
                                                                    "methods=hybrid_rrf,k=3"]  # fmt: skip
    assert rows["methods=base,k=3"]["wall_s"] < rows["methods=base,k=1"]["wall_s"]
    assert plan["wall_s"] == slots_wall([r["wall_s"] for r in rows.values()], 2)
    assert plan["model_loads"] == {"all-MiniLM-L6-v2": 2} and plan["model_loads_unshared"]["all-MiniLM-L6-v2"] == 8
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_sweep_that_cannot_be_placed_is_refused_in_one_line(tmp_path, tiny_data, capsys):
    path = _sweep(tmp_path, tiny_data, ray={"embed_gpus": 1.0})
    assert main(["plan", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("t2rag: error: trial methods=base,k=1: ")


def test_slots_take_the_longest_first():
    assert slots_wall([5, 4, 3, 3, 3], 2) == 10  # 5 | 4, then each 3 to the slot free first: 5+3 | 4+3+3
    assert slots_wall([10], 4) == 10 and slots_wall([1, 1, 1, 1], 1) == 4
