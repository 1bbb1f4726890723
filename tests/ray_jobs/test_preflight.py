"""`t2rag plan` and the check `eval --engine ray` runs before it loads anything."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from ray_jobs.preflight import cluster_file_target, make_plan, render
from t2rag.cli import main
from t2rag.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = {"data": {"source": None, "subsets": ["FinQA", "TAT-DQA"]}}


def test_the_paper_config_fits_one_8_gpu_node_with_its_resources_loads_and_estimate():
    config = load_config(ROOT / "configs/paper_table3.yaml", SAMPLE)
    plan = make_plan(config, cluster_file_target(str(ROOT / "cluster.yaml"), max_workers=1))
    assert plan.refusal is None
    held = [p for p in plan.pools if p.phase in ("run", "evaluate")]
    assert sum(p.actors * p.gpus for p in held) == 8  # the whole node, no more
    (generator,) = [p for p in plan.pools if p.role == "generator"]
    assert generator.phase == "run" and generator.engine == "vllm" and generator.accelerator == "H100"
    assert (generator.actors, generator.gpus) == (6, 1.0)
    assert {p.role: p.gpus for p in held if p.engine == "actors" and p.gpus} == {"queries": 1.0, "rerank": 1.0}
    # One engine per replica for the whole run: summaries, HyDE's documents and the answers share it.
    assert plan.model_loads()["casperhansen/llama-3.3-70b-instruct-awq"] == 6
    e = plan.estimate
    assert e.wall_s is not None and e.wall_s > 0 and e.gpu_hours > 0
    assert set(e.phases) == {"index", "evaluate"}
    assert set(e.sources) == {"casperhansen/llama-3.3-70b-instruct-awq", "intfloat/multilingual-e5-large-instruct",
                              "cross-encoder/ms-marco-MiniLM-L-6-v2"}  # fmt: skip
    text = render(plan)
    assert "Fits: yes" in text and "Model loads: casperhansen/llama-3.3-70b-instruct-awq x6" in text


def _needs_two_gpus(tmp_path) -> Path:
    path = tmp_path / "two_gpus.yaml"
    fields = {"methods": ["base"], "retrieval_only": True, "engine": "ray", "out": str(tmp_path / "run"),
              "ray": {"embed_gpus": 2, "num_gpus": 1}}  # fmt: skip
    path.write_text(yaml.safe_dump(fields))
    return path


def test_plan_refuses_in_seconds_naming_the_pool(capsys, tmp_path):
    start = time.perf_counter()
    code = main(["plan", "--config", str(_needs_two_gpus(tmp_path)), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and time.perf_counter() - start < 30
    assert err.count("\n") == 1 and err.startswith("t2rag: error: the run cannot be placed:")
    assert "index pool 'embed_passages" in err and "2 GPUs; the cluster has 1" in err
    plan = json.loads(out)  # the plan is still printed, as exactly one JSON document
    assert plan["fits"] is False and plan["refusal"] in err


@pytest.mark.slow
def test_eval_on_ray_refuses_before_loading_anything(capsys, tmp_path):
    """A local Ray cluster declaring one (fake) GPU; the run asks for two: refused in seconds, nothing written."""
    start = time.perf_counter()
    code = main(["eval", "--config", str(_needs_two_gpus(tmp_path))])
    _, err = capsys.readouterr()
    assert code == 2 and time.perf_counter() - start < 60
    assert err.strip().splitlines()[-1].startswith("t2rag: error: the run cannot be placed: the index pool")
    assert "alone needs 2 GPUs; the cluster has 1" in err
    assert not (tmp_path / "run").exists()
