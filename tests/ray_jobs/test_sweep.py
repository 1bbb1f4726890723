"""Sweeps as Ray Tune experiments on the jobs' local cluster: every trial an ordinary run equal to its own
`t2rag eval`, a rerun that recomputes nothing, a trial cut short resumed from its records, an Optuna search."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
import yaml

from ray_jobs.sweep import run_final, run_sweep
from t2rag.pipeline.local import run_local
from t2rag.run_folder.files import read_manifest, read_records
from t2rag.sweep.spec import load_sweep


def _sweep_file(tmp_path, tiny_data, **fields):
    path = tmp_path / "sweep.yaml"
    base = {"data": {"source": tiny_data, "split": "dev"}, "retrieval_only": True}
    path.write_text(yaml.safe_dump({"name": "tiny", "base": base, "out": str(tmp_path / "out"), **fields}))
    return path


def _records(run: str) -> list[dict]:
    table = read_records(run).sort_by([("method", "ascending"), ("id", "ascending")])
    return table.drop_columns(["generation_s"]).to_pylist()


def test_a_grid_sweep_is_its_runs_and_resumes_without_recomputing(ray_local, tiny_data, tmp_path):
    grid = {"methods": ["bm25", "base"], "retrieval.k": [1, 3]}
    path = _sweep_file(tmp_path, tiny_data, grid=grid, table={"figures": ["recall@1", "mrr@5"], "by_subset": True})
    sweep = load_sweep(path)
    table = run_sweep(sweep)
    assert [r.status for r in table.rows] == ["finished"] * 4
    for trial in sweep.trials:  # every trial's records equal its separate run's, record by record
        alone = run_local(trial.config.model_copy(update={"out": str(tmp_path / "alone" / trial.name)}))
        assert _records(trial.config.out) == _records(alone["out"])
        row = next(r for r in table.rows if r.trial == trial.name)
        card = alone["methods"][trial.config.methods[0]]
        assert row.figures["FinQA recall@1"] == card["subsets"]["FinQA"]["recall@1"]
        assert row.figures["weighted mrr@5"] == card["weighted"]["mrr@5"]
    started = {t.name: read_manifest(t.config.out)["started"] for t in sweep.trials}

    again = run_sweep(load_sweep(path))  # Tune's restore: every trial finished, none run again
    assert [r.status for r in again.rows] == ["finished"] * 4
    assert {t.name: read_manifest(t.config.out)["started"] for t in sweep.trials} == started

    # The driver died before Tune kept its state, one trial cut short with half its records written.
    shutil.rmtree(tmp_path / "out" / "tune")
    cut = sweep.trials[1].config.out
    parts = sorted((tmp_path / "out" / "trials" / sweep.trials[1].name / "records").glob("*.parquet"))
    whole = sum(pq.read_metadata(p).num_rows for p in parts)
    (tmp_path / "out" / "trials" / sweep.trials[1].name / "result.json").unlink()
    kept = read_records(cut).slice(0, whole // 2)
    for p in parts:
        p.unlink()
    pq.write_table(kept, parts[0])
    resumed = run_sweep(load_sweep(path))
    assert [r.status for r in resumed.rows] == ["finished"] * 4
    manifests = {t.name: read_manifest(t.config.out) for t in sweep.trials}
    recomputed = [name for name, m in manifests.items() if m["started"] != started[name]]
    assert recomputed == [sweep.trials[1].name]  # the finished trials were not run again
    assert len(read_records(cut)) == whole  # the cut trial computed only what it missed, each record once
    assert _records(cut) == _records(str(tmp_path / "alone" / sweep.trials[1].name))


def test_an_optuna_search_on_dev_then_its_best_trial_once_as_final(ray_local, tiny_data, tmp_path):
    space = {"retrieval.bm25.k1": {"low": 0.3, "high": 2.0}, "retrieval.bm25.b": {"low": 0.1, "high": 1.0}}
    path = _sweep_file(tmp_path, tiny_data, grid={"methods": ["bm25"]},
                       search={"algorithm": "optuna", "trials": 3, "space": space, "seed": 1},
                       objective={"metric": "mrr@3", "mode": "max"})  # fmt: skip
    table = run_sweep(load_sweep(path))
    assert len(table.rows) == 3 and all(r.status == "finished" for r in table.rows)
    assert all(0.3 <= r.values["retrieval.bm25.k1"] <= 2.0 for r in table.rows)
    best = next(r for r in table.rows if r.trial == table.best)
    assert best.objective == max(r.objective for r in table.rows)
    config = json.loads((tmp_path / "out" / "trials" / best.trial / "manifest.json").read_text())["config"]
    assert config["retrieval"]["bm25"]["k1"] == best.values["retrieval.bm25.k1"]

    final = run_final(load_sweep(path), best.trial, "dev")
    assert final["out"].endswith(f"{best.trial}.final")
    marked = json.loads((tmp_path / "out" / "table.json").read_text())
    finals = [r for r in marked["rows"] if r["final"]]
    assert [r["trial"] for r in finals] == [f"{best.trial}.final"] and marked["best"] == best.trial


def test_a_failing_trial_is_a_failed_row_and_the_others_finish(ray_local, tiny_data, tmp_path):
    path = _sweep_file(tmp_path, tiny_data, grid={"methods": ["bm25", "no_such_method"]})
    with pytest.raises(Exception, match="no_such_method"):  # an unknown method is refused before any trial
        load_sweep(path)
    bad = _sweep_file(tmp_path, tiny_data, grid={"data.source": [tiny_data, str(tmp_path / "missing")]})
    table = run_sweep(load_sweep(bad))
    statuses = {r.values["data.source"]: (r.status, r.error) for r in table.rows}
    assert statuses[tiny_data] == ("finished", None)
    status, error = statuses[str(tmp_path / "missing")]
    assert status == "failed" and "missing" in error


def test_the_embedder_sweep_is_the_papers_table4(ray_local, mini_data, tmp_path):
    """configs/sweeps/embedders.yaml's shape on the mini data: Base-RAG at k = 5, one trial per embedder block."""
    from t2rag.sweep.report import write_sweep_report

    path = tmp_path / "embedders.yaml"
    embedders = [{"model": "all-MiniLM-L6-v2"}, {"model": "all-MiniLM-L6-v2", "max_seq_length": 64}]
    path.write_text(yaml.safe_dump({
        "name": "embedders", "out": str(tmp_path / "out"),
        "base": {"data": {"source": mini_data}, "methods": ["base"], "retrieval_only": True, "retrieval": {"k": 5}},
        "grid": {"retrieval.embedder": embedders}, "objective": {"metric": "mrr@5"},
        "table": {"figures": ["recall@1", "recall@5", "mrr@5"], "by_subset": True},
    }))  # fmt: skip
    sweep = load_sweep(path)
    table = run_sweep(sweep)
    full, cut = table.rows
    # Truncating passages to 64 tokens hides most of each context: recall@5 must not improve.
    assert cut.figures["weighted recall@5"] <= full.figures["weighted recall@5"]
    # The override took effect: the same model ranks differently when it reads 64 tokens.
    rankings = [read_records(t.config.out).sort_by("id").column("context_ids").to_pylist() for t in sweep.trials]
    differ = sum(a != b for a, b in zip(*rankings, strict=True))
    assert len(rankings[0]) > 20 and differ > len(rankings[0]) // 4, differ
    written = write_sweep_report(sweep.out)
    table4 = (tmp_path / "out" / "report" / "table4.md").read_text()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table4.splitlines()[2:]]
    assert [row[:2] for row in cells] == [["all-MiniLM-L6-v2", "model default"], ["all-MiniLM-L6-v2", "64"]]
    assert float(cells[1][-2]) == pytest.approx(cut.figures["weighted recall@5"], abs=0.005)  # as the table
    assert "FinQA recall@1" in table4.splitlines()[0] and "table4_paper" in written


def test_trials_with_one_generator_share_one_service(ray_local, tiny_data, tmp_path):
    """Two answering trials (one and two questions per subset): SmolLM2 loads once, in the sweep's one replica."""
    path = _sweep_file(tmp_path, tiny_data, grid={"limit": [1, 2]})
    raw = yaml.safe_load(path.read_text())
    raw["base"].update(retrieval_only=False, methods=["pretrained_only"],
                       generator={"preset": "smollm2-135m", "sampling": {"max_tokens": 8}})  # fmt: skip
    path.write_text(yaml.safe_dump(raw))
    sweep = load_sweep(path)
    table = run_sweep(sweep)
    assert [r.status for r in table.rows] == ["finished", "finished"]
    assert table.model_loads == {"smollm2-135m": 1}
    for trial, questions in zip(sweep.trials, (2, 4), strict=True):
        answered = read_records(trial.config.out).to_pylist()
        assert len(answered) == questions and all(r["raw_output"] is not None for r in answered)
        assert "smollm2-135m" not in read_manifest(trial.config.out)["model_loads"]  # the trial loaded none
