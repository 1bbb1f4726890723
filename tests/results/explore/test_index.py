"""The explorer's index of a run: filters against the records, one question's answers read from its record files,
the same from S3, and records written before the outcome column."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from t2rag.results.explore.app import build_app
from t2rag.results.explore.index import load_run
from t2rag.run_folder.files import read_records
from tests.conftest import SCRIPTED_METHODS, upload_dir


@pytest.fixture(scope="module")
def index(scripted_run):
    return load_run(scripted_run)


def test_filters_count_what_the_records_hold(index, scripted_run):
    records = read_records(scripted_run)
    for method in SCRIPTED_METHODS:
        for outcome in ("correct", "gold_not_read"):
            mine = records.filter(pc.and_(pc.equal(records.column("method"), method),
                                          pc.equal(records.column("outcome"), outcome)))  # fmt: skip
            page = index.question_list(method, None, outcome, None, 0, 500)
            assert page["total"] == mine.num_rows
            assert {(r["subset"], r["id"]) for r in page["rows"]} == set(
                zip(mine.column("subset").to_pylist(), mine.column("id").to_pylist(), strict=True)
            )
            assert all(r["outcomes"][method] == outcome for r in page["rows"])
    everything = index.question_list(None, "FinQA", None, None, 0, 10)
    assert everything["total"] == 883 and len(everything["rows"]) == 10
    words = index.question_list(None, None, None, "REVENUE", 0, 200)
    assert words["total"] and all("revenue" in r["question"].lower() for r in words["rows"])


def test_one_question_shows_every_methods_answer_as_recorded(index, scripted_run):
    records = read_records(scripted_run).to_pylist()
    answered = next(r for r in records if r["method"] == "bm25" and r["outcome"] == "wrong_number")
    detail = index.question_detail(answered["subset"], answered["id"])
    assert [a["method"] for a in detail["answers"]] == index.methods  # every method, in the report's order
    mine = {r["method"]: r for r in records if (r["subset"], r["id"]) == (answered["subset"], answered["id"])}
    for a in detail["answers"]:
        row = mine[a["method"]]
        assert (a["outcome"], a["prediction"], a["formula"], a["raw_output"]) == (
            row["outcome"], row["prediction"], row["formula"], row["raw_output"])  # fmt: skip
        assert (a["exe_acc"], a["f1"], a["em_error"]) == (row["exe_acc"], row["f1"], row["em_error"])
        assert a["em"] == (None if row["em"] is None else row["em"] == 1)
        if row["context_ids"] is not None:
            assert [c["context_id"] for c in a["contexts"]] == row["context_ids"][:10]
            assert [c["gold"] for c in a["contexts"]].count(True) == (1 <= row["gold_rank"] <= 10)
    assert detail["gold_context"] == index.context_text(detail["gold_context_id"])
    with pytest.raises(KeyError):
        index.question_detail("FinQA", "no-such-question")


def test_a_run_on_s3_reads_as_the_local_one(index, scripted_run, s3_bucket):
    remote = load_run(upload_dir(Path(scripted_run), s3_bucket, "runs/scripted"))
    assert remote.records.num_rows == index.records.num_rows
    assert remote.overview["headline"] == index.overview["headline"]
    key = index.question_list("bm25", None, "correct", None, 0, 1)["rows"][0]
    assert remote.question_detail(key["subset"], key["id"]) == index.question_detail(key["subset"], key["id"])


def test_records_without_the_outcome_column_get_it(index, scripted_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(scripted_run, old)
    for file in (old / "records").glob("*.parquet"):
        pq.write_table(pq.read_table(file).drop_columns(["outcome"]), file)
    again = load_run(str(old))
    assert again.records.column("outcome").to_pylist() == index.records.column("outcome").to_pylist()
    key = index.question_list("oracle", None, "correct", None, 0, 1)["rows"][0]
    assert again.question_detail(key["subset"], key["id"])["answers"][0]["outcome"] is not None


def test_pages_follow_one_another(index):
    whole = index.question_list(None, "FinQA", None, None, 0, 60)["rows"]
    pages = [index.question_list(None, "FinQA", None, None, offset, 20) for offset in (0, 20, 40)]
    assert [p["offset"] for p in pages] == [0, 20, 40] and all(len(p["rows"]) == 20 for p in pages)
    assert [r for p in pages for r in p["rows"]] == whole


def test_a_context_is_served_by_id_and_an_unknown_one_is_404(index, scripted_run):
    gold = read_records(scripted_run, ["subset", "id"]).slice(0, 1).to_pylist()[0]
    detail = index.question_detail(gold["subset"], gold["id"])
    client = TestClient(build_app(index))
    served = client.get(f"/api/context/{detail['gold_context_id']}")
    assert served.status_code == 200 and served.json()["text"] == detail["gold_context"]
    missing = client.get("/api/context/no-such-context")
    assert missing.status_code == 404 and "no-such-context" in missing.json()["detail"]


def test_the_overview_sets_the_runs_plan_beside_it(index):
    header, rows = index.overview["plan"]["header"], index.overview["plan"]["rows"]
    assert header == ["answers' figure", "planned", "run", "run / planned"]
    answers = {r[0]: r for r in rows}["answers"]
    assert answers[1] == answers[2] > 0 and answers[3] == 1.0  # every planned answer was made


def test_a_run_made_before_result_json_shows_its_plan_too(index, scripted_run, tmp_path):
    older = tmp_path / "older"
    shutil.copytree(scripted_run, older)
    (older / "result.json").rename(older / "summary.json")  # what runs wrote before the file was renamed
    assert load_run(str(older)).overview["plan"] == index.overview["plan"]
