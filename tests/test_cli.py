"""The command-line contract: data stats and score, with exact JSON shapes and one-line errors."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from t2rag.cli import main
from tests.conftest import real_table, write_layout


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_data_stats_json(capsys):
    code, out, _ = run_cli(capsys, "data", "stats", "--json")
    assert code == 0
    stats = json.loads(out)["subsets"]
    assert stats["FinQA"]["questions"] == 883 and stats["FinQA"]["contexts"] == 299
    assert stats["TAT-DQA"]["questions"] == 1142 and stats["TAT-DQA"]["contexts"] == 274
    assert stats["TAT-DQA"]["non_numeric_answers"] == 8 and stats["FinQA"]["excluded"] == []


def test_data_stats_table_and_filters(capsys):
    code, out, _ = run_cli(capsys, "data", "stats", "--subsets", "TAT-DQA", "--split", "dev")
    assert code == 0 and "TAT-DQA" in out and "FinQA" not in out and "1142" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["data", "stats", "--data", "/nonexistent/t2"], "no such directory"),
        (["data", "stats", "--subsets", "ConvFinQA"], "not found"),
        (["data", "stats", "--bogus"], "unrecognized arguments"),
        (["score", "--predictions", "/nonexistent.jsonl"], "no such file"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("t2rag: error:") and message in err and "\n" not in err


def _four_finqa_predictions(sample):
    fin = sample.subset("FinQA").table.slice(0, 4)
    ids = fin.column("id").to_pylist()
    answers = fin.column("answer_value").to_pylist()
    gold = fin.column("context_id").to_pylist()
    model_text = (
        "Here is my answer:\n```json\n"
        + json.dumps(
            {"reasoning_steps": ["read the table"], "final_formula": f"add({answers[3]}, 0)", "computed_formula": "7"}
        )
        + "\n```"
    )
    return [
        {"id": ids[0], "prediction": answers[0], "context_ids": [gold[0], "x", "y"]},
        {"id": ids[1], "prediction": answers[1] * 100, "context_ids": ["x", gold[1], "y"]},
        {"id": ids[2], "prediction": "not a number", "context_ids": ["x", "y", "z", "w", "v"]},
        {"id": ids[3], "prediction": model_text, "context_ids": ["x", "y", gold[3]]},
    ]


def test_score_hand_checked(capsys, sample, tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _four_finqa_predictions(sample)))
    code, out, _ = run_cli(capsys, "score", "--predictions", str(path), "--only-predicted", "--json")
    assert code == 0
    result = json.loads(out)
    fin = result["subsets"]["FinQA"]
    assert fin["questions"] == 4
    assert fin["number_match"] == 75.0  # exact, x100 (scale-invariant), wrong, formula evaluated
    assert fin["mrr@3"] == pytest.approx(100 * (1 + 1 / 2 + 0 + 1 / 3) / 4, abs=1e-3)
    assert fin["recall@1"] == 25.0 and fin["recall@3"] == 75.0 and fin["recall@5"] == 75.0
    assert fin["ndcg@3"] == pytest.approx(100 * (1 + 1 / 1.5849625 + 0 + 0.5) / 4, abs=1e-3)
    assert result["weighted"]["mrr@3"] == fin["mrr@3"]


def test_score_parquet_with_only_context_ids(capsys, sample, tmp_path):
    rows = _four_finqa_predictions(sample)
    path = tmp_path / "preds.parquet"
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "context_ids": [r["context_ids"] for r in rows]}), path)
    code, out, _ = run_cli(capsys, "score", "--subsets", "FinQA", "--predictions", str(path), "--json")
    fin = json.loads(out)["subsets"]["FinQA"]
    # Every FinQA question counts: the 879 without a ranking are ranked without their gold context.
    assert code == 0 and "number_match" not in fin and fin["questions"] == 883
    assert fin["recall@3"] == pytest.approx(100 * 3 / 883, abs=1e-3)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"prediction": 1}'], "'id' column"),
        (['{"id": "finqa_dev_0"}'], "'prediction' or a 'context_ids'"),
        (['{"id": "finqa_dev_0", "prediction": 1}', '{"id": "finqa_dev_0", "prediction": 2}'], "duplicate ids"),
        (["{not json"], "not valid JSON"),
        (['{"id": "finqa_dev_0", "context_ids": "c1"}'], "must be a list"),
    ],
)
def test_score_rejects_bad_predictions(capsys, tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines))
    code, _, err = run_cli(capsys, "score", "--predictions", str(path))
    assert code == 2 and message in err and err.count("\n") == 1


def test_score_counts_every_scorable_question(capsys, sample, tmp_path):
    """24 right answers out of 54 questions is 44.4%, not the 100% of scoring only the answered ids."""
    table = sample.subset("FinQA").scored().slice(0, 54)
    ids, values = table["id"].to_pylist()[:24], table["answer_value"].to_pylist()[:24]
    rows = [{"id": i, "prediction": v} for i, v in zip(ids, values, strict=True)]
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    finqa = real_table("FinQA")
    data = write_layout(tmp_path / "layout", {"FinQA": finqa.filter(pc.is_in(finqa["id"], table["id"]))})
    code, out, err = run_cli(capsys, "score", "--data", str(data), "--predictions", str(path), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert code == 0 and result["weighted"]["questions"] == 54
    assert result["weighted"]["number_match"] == pytest.approx(100 * 24 / 54, abs=1e-3)
    assert result["predictions"]["answered"] == 24 and result["predictions"]["missing"] == 30
    code, out, _ = run_cli(
        capsys, "score", "--data", str(data), "--predictions", str(path), "--only-predicted", "--json"
    )
    assert json.loads(out)["weighted"]["number_match"] == 100.0  # the declared subset, on request only


def test_score_reports_unknown_and_unreadable_and_is_strict_on_request(capsys, sample, tmp_path):
    ids = sample.subset("FinQA").scored()["id"].to_pylist()
    answer = sample.subset("FinQA").scored()["answer_value"][0].as_py()
    lines = [
        {"id": ids[0], "prediction": answer},
        {"id": ids[1], "prediction": "no idea"},
        {"id": ids[2], "prediction": float("nan")},
        {"id": ids[3], "prediction": float("inf")},
        {"id": ids[4], "prediction": {"weird": [1]}},
        {"id": ids[5], "prediction": None},
        {"id": "no-such-question", "prediction": 1.0},
    ]
    path = tmp_path / "garbage.jsonl"
    huge = f'{{"id": "{ids[6]}", "prediction": 1{"0" * 400}}}'  # 10**400: valid JSON, no float holds it
    path.write_text("\n".join([*(json.dumps(r) for r in lines), huge]))
    code, out, _ = run_cli(capsys, "score", "--subsets", "FinQA", "--predictions", str(path), "--json")
    counts = json.loads(out)["predictions"]
    assert code == 0
    assert counts == {
        "rows": 8,
        "answered": 1,
        "unreadable": 5,  # a word, NaN, inf, a dict without an answer, 10**400
        "unanswered": 1,
        "unknown": 1,
        "excluded": 0,
        "missing": 883 - 7,
        "missing_scored_wrong": True,
    }
    code, out, err = run_cli(capsys, "score", "--subsets", "FinQA", "--predictions", str(path), "--strict")
    assert code == 1 and "(--strict)" in err and "5 unreadable" in out and "876 scorable questions missing" in out


def _garbage_parquet(path):
    path.write_bytes(b"PAR1 this is not parquet PAR1")
    return path


@pytest.mark.parametrize(
    ("setup", "argv", "fragment"),
    [
        (lambda d: (d / "c.yaml").write_bytes(b"methods: [\xff\xfe]\n"), ["eval", "--config", "{d}/c.yaml"], "UTF-8"),
        (lambda d: (d / "c.yaml").mkdir(), ["eval", "--config", "{d}/c.yaml"], "is a directory"),
        (lambda d: (d / "c.yaml").write_text("methods: [bm25, base\n"), ["eval", "--config", "{d}/c.yaml"], "line"),
        (lambda d: None, ["eval", "--methods", ",", "--out", "{d}/run"], "no method named"),
        (
            lambda d: (d / "p.jsonl").write_bytes(b'{"id": "\xff"}\n'),
            ["score", "--predictions", "{d}/p.jsonl"],
            "UTF-8",
        ),
        (lambda d: _garbage_parquet(d / "p.parquet"), ["score", "--predictions", "{d}/p.parquet"], "parquet"),
        (
            lambda d: _garbage_parquet((d / "run" / "records").mkdir(parents=True) or d / "run/records/x.parquet"),
            ["report", "{d}/run"],
            "record file",
        ),
        (
            lambda d: write_layout(d / "empty", {"FinQA": real_table("FinQA").slice(0, 0)}),
            ["data", "stats", "--data", "{d}/empty"],
            "no questions",
        ),
    ],
)
def test_bad_files_give_one_line_and_exit_2(capsys, tmp_path, setup, argv, fragment):
    setup(tmp_path)
    code, _, err = run_cli(capsys, *(a.format(d=tmp_path) for a in argv))
    assert code == 2, err
    assert err.startswith("t2rag: error: ") and err.count("\n") == 1 and fragment in err, err
    assert str(tmp_path) in err or fragment == "no method named"  # names the file


@pytest.mark.parametrize(
    "argv",
    [
        ["score", "--predictions", "s3://t2rag-nowhere/preds.jsonl"],
        ["data", "stats", "--data", "s3://t2rag-nowhere/data"],
        ["eval", "--methods", "bm25", "--retrieval-only", "--out", "s3://t2rag-nowhere/run"],
        ["report", "s3://t2rag-nowhere/run"],
    ],
    ids=["score-predictions", "data", "eval-out", "report"],
)
def test_unreachable_s3_is_one_line(capsys, monkeypatch, argv):
    from tests.conftest import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    for name, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and err.startswith("t2rag: error: ") and err.count("\n") == 1, err
    assert "t2rag-nowhere" in err


@pytest.mark.parametrize(
    "argv, config, expected",
    [
        (["eval", "--engine", "ray"], None, "t2rag: error: --engine is now --runner"),
        (["eval", "--engine=local", "--limit", "1"], None, "t2rag: error: --engine is now --runner"),
        (["plan"], "engine: local\nmethods: [bm25]\n", "config: 'engine' (local or ray) is now 'runner'"),
        (["plan"], "ray:\n  generate_actors: 2\n", "ray.generate_actors is now generator.replicas"),
    ],
)
def test_an_old_flag_or_config_key_is_answered_with_its_successor(capsys, tmp_path, argv, config, expected):
    if config is not None:
        (tmp_path / "old.yaml").write_text(config)
        argv = [*argv, "--config", str(tmp_path / "old.yaml")]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and expected in err


def test_methods_lists_every_registered_method_with_its_chain(capsys):
    from t2rag.methods import METHODS

    assert main(["methods", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in listed] == list(METHODS)
    by_name = {m["name"]: m for m in listed}
    assert set(by_name["bm25_focus"]) == {"name", "stages", "retriever", "origin", "version"}
    assert by_name["bm25_focus"]["retriever"] == "bm25_focus" and by_name["oracle"]["retriever"] is None
    assert by_name["base"]["stages"][:2] == ["embed_queries", "retrieve"]
    assert by_name["base"]["stages"][-2:] == ["generate", "parse_answers"]
    assert {(m["origin"], m["version"]) for m in listed} == {("built-in", None)}
    assert main(["methods"]) == 0
    assert "| bm25_focus " in capsys.readouterr().out
