"""A run's plan of itself: the same figures as `t2rag plan` for the same pools, and the run's own beside them."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ray_jobs.preflight import local_target, make_plan, pools_of
from t2rag.config import load_config
from t2rag.estimate.plan_vs_run import against_run, plan_of_run, plan_table
from t2rag.estimate.rates import load_rates
from t2rag.resources import Resources
from t2rag.stages.work import work_left


def test_the_runs_plan_is_t2rag_plans_for_the_same_pools():
    config = load_config(None, {"methods": ["oracle", "bm25", "base"], "generator": "qwen2.5-0.5b", "limit": 2,
                                "retrieval_only_methods": ["base"]})  # fmt: skip
    resources = Resources(config)
    work = work_left(config, resources.questions)
    pools = {p.role: p for p in pools_of(config, resources, work)}
    shapes = {r: pools[r].shape for r in ("passages", "queries")}
    mine = plan_of_run(config, resources, work, shapes)
    plan = make_plan(config, local_target(config), resources)
    seconds = {t.pool.role: t.seconds for t in plan.estimate.pools}
    assert mine["passages_s"] == pytest.approx(seconds["passages"], abs=0.05)
    assert mine["queries_s"] == pytest.approx(seconds["queries"], abs=0.05)
    load = load_rates().generators["qwen2.5-coder-0.5b"].load_s  # the plan's generator time carries one load
    assert mine["generation_s"] == pytest.approx(seconds["generator"] - load, abs=0.05)
    answers = plan.workload.total("answers")
    assert (mine["answers"], mine["prompt_tokens"], mine["to_compute"]) == (
        answers.prompts, answers.prompt_tokens, answers.to_compute)  # fmt: skip
    assert len(mine["keys"]) == 8  # oracle and bm25, 2 questions per subset


def test_the_run_is_set_beside_its_plan_figure_by_figure():
    plan = {"answers": 2, "prompt_tokens": 100, "to_compute": 60, "output_tokens": 20, "generation_s": 10.0,
            "passages_s": 5.0, "queries_s": None, "rates": "r.yaml", "keys": ["bm25\x1fq1", "bm25\x1fq2"]}  # fmt: skip
    records = pa.table({
        "method": ["bm25", "bm25", "bm25"], "id": ["q1", "q2", "q3"], "prompt_tokens": [50, 60, 999],
        "cached_prompt_tokens": [10, None, 0], "completion_tokens": [8, 12, 999], "generation_s": [4.0, 7.0, 99.0],
    })  # fmt: skip
    checked = against_run(plan, records, {"index": 6.0, "embed_queries": 3.0})
    assert checked["actual"] == {"answers": 2, "prompt_tokens": 110, "to_compute": 100, "output_tokens": 20,
                                 "generation_s": 11.0, "passages_s": 6.0, "queries_s": 3.0}  # fmt: skip
    assert checked["actual_over_planned"]["to_compute"] == pytest.approx(100 / 60, abs=1e-3)
    assert checked["actual_over_planned"]["queries_s"] is None  # nothing planned for it
    header, rows = plan_table(checked)
    assert header[1:] == ["planned", "run", "run / planned"]
    assert [r[0] for r in rows] == ["answers", "prompt tokens", "prompt tokens computed", "output tokens",
                                    "generator seconds", "embedding passages, seconds"]  # fmt: skip
    assert against_run(None, records, {}) is None
