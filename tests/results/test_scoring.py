"""Scoring a predictions file: what each row counts as, and the records the scorecard is made from."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.results.scoring import Predictions, prediction_records, score_predictions


def _ids(sample, n: int) -> list[str]:
    return sample.scored().column("id").to_pylist()[:n]


def _column_by_id(sample, name: str) -> dict:
    scored = sample.scored()
    return dict(zip(scored.column("id").to_pylist(), scored.column(name).to_pylist(), strict=True))


def test_a_rankings_only_file_counts_ranked_rows_as_answered_and_nulls_as_unanswered(sample):
    ids = _ids(sample, 4)
    gold = _column_by_id(sample, "context_id")
    preds = Predictions(ids, context_ids=[[gold[ids[0]], "x"], None, ["x", gold[ids[2]]], None], origin="t")
    records, counts = prediction_records(sample, preds, only_predicted=True)
    c = counts[""]
    assert (c.rows, c.answered, c.unanswered, c.unreadable) == (4, 2, 2, 0)
    ranks = dict(zip(records.column("id").to_pylist(), records.column("gold_rank").to_pylist(), strict=True))
    assert ranks == {ids[0]: 1, ids[1]: None, ids[2]: 2, ids[3]: None}


def test_predictions_count_answered_unreadable_and_unanswered(sample):
    ids = _ids(sample, 3)
    preds = Predictions(ids, prediction=[12.5, "no idea", None], origin="t")
    _, counts = prediction_records(sample, preds, only_predicted=True)
    c = counts[""]
    assert (c.answered, c.unreadable, c.unanswered) == (1, 1, 1)


def test_a_runs_records_count_by_their_verdict(sample):
    """A run's records carry their verdicts: a row without one (never generated) is unanswered, whatever its
    prediction column holds."""
    ids = _ids(sample, 3)
    records = {"method": ["m"] * 3, "context_ids": [None] * 3, "gold_rank": [None] * 3,
               "prediction": [1.0, float("nan"), 2.0], "number_match": [True, False, None]}  # fmt: skip
    preds = Predictions(ids, prediction=records["prediction"], method=["m"] * 3, records=records, origin="t")
    _, counts = prediction_records(sample, preds, only_predicted=True)
    c = counts["m"]
    assert (c.answered, c.unreadable, c.unanswered) == (1, 1, 1)


def test_questions_left_out_of_a_file_are_wrong_with_their_reference(sample):
    ids = _ids(sample, 2)
    gold, references = _column_by_id(sample, "context_id"), _column_by_id(sample, "answer_value")
    preds = Predictions(ids, prediction=[None, None], context_ids=[[gold[ids[0]]], None], origin="t")
    records, counts = prediction_records(sample, preds, only_predicted=False)
    total = sample.scored().num_rows
    assert counts[""].missing == total - 2 and records.num_rows == total
    left_out = [r for r in records.to_pylist() if r["id"] not in ids]
    assert len(left_out) == total - 2
    assert all(r["number_match"] is False and r["gold_rank"] == 0 for r in left_out)
    assert all(r["reference"] == references[r["id"]] for r in left_out if references[r["id"]] is not None)
    assert score_predictions(sample, preds)["weighted"]["questions"] == total


def _write_jsonl(path, rows) -> str:
    import json

    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_every_file_kind_reads_to_the_same_predictions(sample, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from t2rag.results.scoring import read_predictions

    ids = _ids(sample, 2)
    rows = [{"id": ids[0], "prediction": 1.5, "context_ids": ["a", "b"]}, {"id": ids[1], "prediction": None}]
    expected = Predictions(ids, [1.5, None], [["a", "b"], None], None, None, "")
    for name in ("p.jsonl", "p.json", "p.ndjson"):
        got = read_predictions(_write_jsonl(tmp_path / name, rows))
        assert (got.ids, got.prediction, got.context_ids, got.method, got.records) == (
            expected.ids, expected.prediction, expected.context_ids, None, None)  # fmt: skip
        assert got.origin == str(tmp_path / name)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    got = read_predictions(str(tmp_path / "p.parquet"))
    assert (got.ids, got.prediction, got.context_ids, got.origin) == (ids, [1.5, None], [["a", "b"], None],
                                                                       str(tmp_path / "p.parquet"))  # fmt: skip
    # A run's directory: its records/ are read, and a file with every record column is taken as scored records.
    records = {"id": ids, "method": ["m", "m"], "context_ids": [["a"], None], "gold_rank": [1, None],
               "prediction": [1.5, None], "number_match": [True, None]}  # fmt: skip
    (tmp_path / "run" / "records").mkdir(parents=True)
    pq.write_table(pa.table(records), tmp_path / "run" / "records" / "part-0.parquet")
    (tmp_path / "run" / "result.json").write_text("{}")  # a run's other files are not records
    for where in (tmp_path / "run", tmp_path / "run" / "records"):
        got = read_predictions(str(where))
        assert got.method == ["m", "m"] and got.records["number_match"] == [True, None] and got.origin == str(where)


def test_unreadable_predictions_are_one_clear_error(tmp_path):
    from t2rag.errors import InputError
    from t2rag.results.scoring import read_predictions

    cases = {
        "p.csv": ("id\n1\n", "predictions must be .jsonl or .parquet"),
        "p.parquet": ("not parquet", "not a readable parquet file"),
        "noid.jsonl": ('{"prediction": 1}\n', "predictions need an 'id' column"),
        "nothing.jsonl": ('{"id": "a"}\n', "need a 'prediction' or a 'context_ids' column"),
        "blank.jsonl": ('{"id": "", "prediction": 1}\n', "some rows have no id"),
        "string.jsonl": ('{"id": "a", "context_ids": [1]}\n{"id": "b", "context_ids": "x"}\n',
                         "row 2: 'context_ids' must be a list of ids"),
    }  # fmt: skip
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError) as caught:
            read_predictions(str(tmp_path / name))
        assert str(caught.value).startswith(f"{tmp_path / name}: ") and message in str(caught.value), name
    (tmp_path / "dir" / "records").mkdir(parents=True)
    (tmp_path / "dir" / "records" / "x.parquet").write_text("junk")
    with pytest.raises(InputError, match="a record file is not readable"):
        read_predictions(str(tmp_path / "dir"))


def test_methods_counts_and_unknown_rows(sample, caplog):
    ids = _ids(sample, 2)
    preds = Predictions([ids[0], "nope", ids[1], ids[0]], prediction=[1, 2, 3, 4], method=["a", "a", "b", "b"],
                        origin="f")  # fmt: skip
    records, counts = prediction_records(sample, preds, only_predicted=True)
    assert {m: (c.rows, c.unknown, c.answered) for m, c in counts.items()} == {"a": (2, 1, 1), "b": (2, 0, 2)}
    assert "f: 1 rows of a name no question of the data and are not scored" in caplog.text
    only_unknown = Predictions(["nope"], prediction=[1.0], origin="g")
    records, counts = prediction_records(sample, only_unknown, only_predicted=False)
    assert counts[""].unknown == 1 and counts[""].missing == sample.scored().num_rows == records.num_rows
    assert "g: 1 rows of the file name no question" in caplog.text
    with pytest.raises(Exception, match="2 duplicate ids"):
        prediction_records(sample, Predictions([ids[0], ids[0], ids[1], ids[1]], prediction=[1] * 4, origin="d"), True)


def test_the_scorecard_shapes_with_and_without_methods(sample):
    ids = _ids(sample, 2)
    nothing = score_predictions(sample, Predictions(["nope"], prediction=[1.0], origin="x"), only_predicted=True)
    assert nothing["subsets"] == {} and nothing["weighted"] == {"questions": 0}
    assert nothing["predictions"]["unknown"] == 1
    gold = _column_by_id(sample, "context_id")
    ranked = Predictions(ids, context_ids=[[gold[i]] for i in ids], method=["m", "m"], origin="x")
    out = score_predictions(sample, ranked, retrieval_metrics=("mrr@2",), only_predicted=True)
    assert set(out) == {"methods", "predictions"} and out["predictions"]["m"]["answered"] == 2
    assert out["methods"]["m"]["weighted"]["mrr@2"] == 100.0 and "mrr@3" not in out["methods"]["m"]["weighted"]
    assert ranked.rows(np.array([True, False])).origin == "x" and ranked.rows(np.array([False, True])).ids == [ids[1]]
