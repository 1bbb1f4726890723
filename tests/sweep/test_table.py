"""A sweep's table, report and MLflow logging from real trial runs (each trial run here, in one process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ray_jobs.sweep import claim_sweep
from t2rag.cli import main
from t2rag.pipeline.local import run_local
from t2rag.sweep.spec import load_sweep
from t2rag.sweep.table import sweep_table


@pytest.fixture(scope="module")
def ran(tiny_data, tmp_path_factory):
    """A 2 x 2 grid on the tiny data, every trial run by the local runner (as a Tune trial runs it)."""
    import yaml

    root = tmp_path_factory.mktemp("sweep")
    path = root / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "tiny", "base": {"data": {"source": tiny_data}, "retrieval_only": True},
        "grid": {"methods": ["bm25", "hybrid_rrf"], "retrieval.k": [1, 3]},
        "objective": {"metric": "mrr@3"}, "out": str(root / "out"),
    }))  # fmt: skip
    sweep = load_sweep(path)
    claim_sweep(sweep)
    results = {t.name: run_local(t.config) for t in sweep.trials}
    return sweep, results


def test_the_table_has_every_trial_its_best_and_its_frontier(ran):
    sweep, results = ran
    table = sweep_table(sweep)
    assert [r.trial for r in table.rows] == [t.name for t in sweep.trials]
    assert all(r.status == "finished" and r.seconds is not None for r in table.rows)
    assert all(r.gpu_seconds == 0.0 and r.cost is None for r in table.rows)  # CPU-only trials, no price set
    mrr = {name: result["methods"][name.split(",")[0].split("=")[1]]["weighted"]["mrr@3"]
           for name, result in results.items()}  # fmt: skip
    assert {r.trial: r.objective for r in table.rows} == mrr
    tied = [name for name, value in mrr.items() if value == max(mrr.values())]
    seconds = {r.trial: r.seconds for r in table.rows}
    assert table.best == min(tied, key=seconds.get)  # of equal figures, the faster trial
    assert table.best in table.pareto
    test = table.best_vs_runner_up
    assert test["metric"] == "mrr@3" and test["questions"] == results[table.best]["methods"][
        next(iter(results[table.best]["methods"]))]["weighted"]["questions"]  # fmt: skip
    with open(sweep.out + "/table.csv") as f:
        header = f.readline().strip().split(",")
    assert header[:3] == ["trial", "methods", "retrieval.k"] and "mrr@3" in header and "seconds" in header


def test_report_and_explore_of_a_sweep_folder(ran, capsys):
    sweep, _ = ran
    assert main(["report", sweep.out, "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert Path(written["quality_vs_cost"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"by methods", "by retrieval.k"} <= set(written)
    page = Path(written["report"]).read_text()
    assert "Best by mrr@3" in page and "Pareto frontier" in page
    assert main(["explore", sweep.out]) == 0
    listed = capsys.readouterr().out
    assert all(t.name in listed for t in sweep.trials)
    trial = sweep.trials[0].config.out  # a trial is an ordinary run: report works on it unchanged
    assert main(["report", trial, "--json"]) == 0


def test_the_sweep_is_logged_to_mlflow_as_a_parent_with_nested_trials(ran):
    from mlflow.tracking import MlflowClient

    from t2rag.config import MlflowTracking, TrackingConfig
    from t2rag.results.tracking import tracking_uri
    from t2rag.sweep.tracking import log_sweep

    sweep, results = ran
    spec = sweep.spec.model_copy(update={"tracking": TrackingConfig(mlflow=MlflowTracking())})
    tracked = type(sweep)(spec, sweep.base_raw, sweep.base_dir, sweep.trials)
    table = sweep_table(tracked)
    parent = log_sweep(tracked, table)
    assert log_sweep(tracked, table) == parent  # logged again: the same parent, no trial twice
    client = MlflowClient(tracking_uri(spec.tracking.mlflow, sweep.out))
    experiment = client.get_experiment_by_name("tiny")
    nested = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    assert sorted(r.info.run_name for r in nested) == sorted(t.name for t in sweep.trials)
    run = next(r for r in nested if r.info.run_name == "methods=bm25,k=3")
    assert run.data.params == {"methods": "bm25", "retrieval.k": "3"}
    card = results["methods=bm25,k=3"]["methods"]["bm25"]
    assert run.data.metrics["bm25.weighted.mrr_at_3"] == pytest.approx(card["weighted"]["mrr@3"])
    assert run.data.metrics["bm25.FinQA.recall_at_1"] == pytest.approx(card["subsets"]["FinQA"]["recall@1"])
    assert {"run.seconds", "run.tokens.prompt"} <= set(run.data.metrics)
    dense = next(r for r in nested if r.info.run_name == "methods=hybrid_rrf,k=3")
    assert "plan.passages_s" in dense.data.metrics  # the plan beside what the run measured
    assert run.data.tags["t2rag.version"] and run.data.tags["t2rag.runner"] == "local"
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.json", "result.json", "report"} <= names
    report = {a.path for a in client.list_artifacts(run.info.run_id, "report")}
    assert {"report/report.md", "report/headline.md"} <= report  # the trial's own `t2rag report`
    parent_run = client.get_run(parent)
    assert parent_run.data.tags["t2rag.best"] == table.best
    assert {a.path for a in client.list_artifacts(parent)} >= {"table.csv", "table.md", "table.json"}
