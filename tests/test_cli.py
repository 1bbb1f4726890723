"""The command-line contract: data stats and score, with exact JSON shapes and one-line errors."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from t2rag.cli import main


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
    code, out, _ = run_cli(capsys, "score", "--predictions", str(path), "--json")
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
    code, out, _ = run_cli(capsys, "score", "--predictions", str(path), "--json")
    fin = json.loads(out)["subsets"]["FinQA"]
    assert code == 0 and "number_match" not in fin and fin["recall@3"] == 75.0


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"prediction": 1}'], "'id' column"),
        (['{"id": "finqa_dev_0"}'], "'prediction' or a 'context_ids'"),
        (['{"id": "nope", "prediction": 1}'], "not in the data"),
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
