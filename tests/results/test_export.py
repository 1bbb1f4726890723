"""The leaderboard export: written from a real run's records, read back, and checked against the question set."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.errors import InputError
from t2rag.pipeline.local import run_local
from t2rag.results.export import export_leaderboard, run_questions, validate_leaderboard
from t2rag.run_folder.files import read_records, write_records
from t2rag.run_folder.records import to_records
from t2rag.storage import read_objects


@pytest.fixture(scope="module")
def bm25_run(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("bm25_run")
    fields = {"methods": ["bm25"], "retrieval_only": True, "data": {"subsets": ["FinQA"]}, "out": str(out)}
    run_local(load_config(None, fields))
    return str(out)


def test_round_trip_of_a_real_run(bm25_run, tmp_path, capsys):
    out = tmp_path / "submission.jsonl"
    assert main(["export", bm25_run, "--format", "leaderboard", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)  # exactly one JSON document on stdout
    rows = read_objects(out.read_bytes(), str(out))
    records = read_records(bm25_run).to_pylist()
    assert printed == {
        "path": str(out),
        "method": "bm25",
        "questions": len(records),
        "with_contexts": len(records),
        "with_prediction": 0,
        "origin": "built-in",
    }
    by_id = {r["id"]: r for r in records}
    assert [r["id"] for r in rows] == [r["id"] for r in records]
    for row in rows:
        assert row == {
            "id": row["id"],
            "subset": "FinQA",
            "context_id": by_id[row["id"]]["context_ids"],
            "prediction": None,
        }
        assert len(row["context_id"]) >= 3  # k, or deeper for Recall@5
    questions = run_questions(bm25_run)
    assert sorted(by_id) == sorted(questions.scored().column("id").to_pylist())
    validate_leaderboard(rows, questions)  # what was written passes the check it was written under


def test_predictions_are_carried_and_non_finite_ones_become_null(bm25_run, tmp_path):
    questions = run_questions(bm25_run).scored()
    ids, subsets = questions.column("id").to_pylist(), questions.column("subset").to_pylist()
    predictions = [float(i) + 0.5 for i in range(len(ids))]
    predictions[0], predictions[1] = math.nan, None
    answered = pa.table(
        {"id": ids, "subset": subsets, "method": ["pretrained_only"] * len(ids), "prediction": predictions}
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(_manifest(bm25_run))
    write_records(str(run), to_records(answered), "answers")
    out = tmp_path / "answers.jsonl"
    done = export_leaderboard(str(run), str(out), method="pretrained_only")
    rows = read_objects(out.read_bytes(), str(out))
    assert done.with_prediction == len(ids) - 2
    assert [r["prediction"] for r in rows] == [None, None, *predictions[2:]]
    assert all(r["context_id"] == [] for r in rows)  # a method that does not retrieve ranks nothing


def _manifest(run_dir: str) -> str:
    with open(f"{run_dir}/manifest.json") as f:
        return f.read()


def test_the_check_refuses_what_the_leaderboard_would_reject(bm25_run):
    questions = run_questions(bm25_run)
    rows = [{"id": r["id"], "subset": r["subset"], "context_id": [], "prediction": None} for r in
            read_records(bm25_run).to_pylist()]  # fmt: skip
    with pytest.raises(InputError, match="more than once"):
        validate_leaderboard([*rows, rows[0]], questions)
    with pytest.raises(InputError, match="labelled TAT-DQA but belongs to FinQA"):
        validate_leaderboard([{**rows[0], "subset": "TAT-DQA"}, *rows[1:]], questions)
    with pytest.raises(InputError, match="not a scored question"):
        validate_leaderboard([*rows, {**rows[0], "id": "no-such-id"}], questions)
    with pytest.raises(InputError, match=r"1 of \d+ scored questions have no record.*--partial"):
        validate_leaderboard(rows[1:], questions)
    validate_leaderboard(rows[1:], questions, partial=True)


def test_a_run_with_several_methods_needs_one_named(bm25_run, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(_manifest(bm25_run))
    records = read_records(bm25_run)
    write_records(str(run), records, "a")
    write_records(str(run), records.set_column(2, "method", pa.array(["base"] * records.num_rows)), "b")
    assert main(["export", str(run), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "several methods (bm25, base); choose one with --method" in capsys.readouterr().err
    assert main(["export", str(run), "--out", str(tmp_path / "x.jsonl"), "--method", "base"]) == 0
