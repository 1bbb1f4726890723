"""`t2rag compare` between runs and methods: exactly JSON with the documented keys, the same numbers as the
within-run tests, and refusals with one line and exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from t2rag.cli import main
from t2rag.errors import InputError
from t2rag.results.compare import Side, check_same_data, pairs, parse_side
from t2rag.results.significance import compare
from t2rag.run_folder.files import read_records

KEYS = {"method", "subset", "metric", "a", "b", "diff", "ci95", "p_value", "test", "questions"}


def _json(capsys, *argv: str) -> list[dict]:
    assert main(["compare", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_methods_of_one_run(scripted_run, capsys):
    rows = _json(capsys, f"{scripted_run}:bm25", f"{scripted_run}:bm25_meta")
    assert rows and all(set(r) == KEYS for r in rows)
    assert {r["metric"] for r in rows} == {"number_match", "em", "f1", "exe_acc", "mrr@3", "mrr@5", "recall@1",
                                           "recall@3", "recall@5", "ndcg@3"}  # fmt: skip
    tests = {r["metric"]: r["test"] for r in rows}
    assert tests["em"] == tests["exe_acc"] == "mcnemar_exact" and tests["f1"] == "paired_randomization"
    assert {r["subset"] for r in rows} == {"FinQA", "TAT-DQA", "weighted"}
    records = read_records(scripted_run)
    same = {(d.metric, d.subset): d for d in compare(records, "bm25", records, "bm25_meta", ["number_match", "mrr@3"])}
    for r in rows:
        if (r["metric"], r["subset"]) in same:
            d = same[(r["metric"], r["subset"])]
            assert (r["method"], r["a"], r["b"], r["p_value"], r["questions"]) == ("bm25 vs bm25_meta", d.a, d.b,
                                                                                    d.p_value, d.questions)  # fmt: skip


def test_two_runs_compare_the_methods_they_share(scripted_run, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(scripted_run, other)
    rows = _json(capsys, scripted_run, str(other))
    assert {r["method"] for r in rows} == {"oracle", "pretrained_only", "bm25", "bm25_meta"}
    assert all(r["diff"] == 0 and r["p_value"] == 1.0 for r in rows)  # a run against its copy
    assert main(["compare", f"{scripted_run}:bm25", str(other)]) == 0  # one method named: the same in both
    out = capsys.readouterr().out
    assert "| bm25 " in out and "bm25_meta" not in out and "holds (Holm)" in out


def _split_by_subset(run: str, root: Path) -> tuple[Path, Path]:
    """Two copies of the run, one holding only its FinQA records, the other only its TAT-DQA records."""
    parts = []
    for subset in ("FinQA", "TAT-DQA"):
        copy = root / subset
        shutil.copytree(run, copy)
        for file in (copy / "records").glob("*.parquet"):
            table = pq.read_table(file)
            pq.write_table(table.filter(pc.equal(table.column("subset"), subset)), file)
        parts.append(copy)
    return parts[0], parts[1]


def test_refusals_are_one_line_and_exit_2(scripted_run, tiny_data, tmp_path, capsys):
    finqa, tat = _split_by_subset(scripted_run, tmp_path)
    assert main(["compare", str(finqa), str(tat), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().endswith("share no question")
    assert len(captured.err.strip().splitlines()) == 1
    # A run on other data (the tiny layout: 4 FinQA contexts) cannot be paired with the sample's.
    other = tmp_path / "tiny"
    assert (
        main(["eval", "--data", tiny_data, "--methods", "bm25", "--retrieval-only", "--out", str(other), "--json"]) == 0
    )
    capsys.readouterr()
    assert main(["compare", scripted_run, f"{other}:bm25"]) == 2
    err = capsys.readouterr().err.strip()
    assert "were run on different data" in err and len(err.splitlines()) == 1
    assert main(["compare", f"{scripted_run}:hyde", scripted_run]) == 2
    assert "no records of method 'hyde'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("runs/a", ("runs/a", None)),
        ("runs/a:bm25", ("runs/a", "bm25")),
        ("s3://bucket/runs/a", ("s3://bucket/runs/a", None)),
        ("s3://bucket/runs/a:bm25_meta", ("s3://bucket/runs/a", "bm25_meta")),
        ("C:/runs/a", ("C:/runs/a", None)),
    ],
)
def test_sides_name_a_run_and_optionally_a_method(spec, parsed):
    assert parse_side(spec) == parsed


def _side(run: str, methods: list[str], data: dict | None, method: str | None = None):
    records = pa.table({"method": methods, "id": [f"q{i}" for i in range(len(methods))]})
    return Side(run, method, records, {"data": data} if data else None)


@pytest.mark.parametrize("change", [{"pooled_corpus": True}, {"distractors": 1000}])
def test_runs_on_a_pooled_or_padded_corpus_are_not_paired_with_plain_ones(change):
    plain = {"subsets": {"FinQA": {"splits": ["dev"], "questions": 3, "contexts": 3}}, "pooled_corpus": False,
             "distractors": 0}  # fmt: skip
    check_same_data(_side("a", ["bm25"], plain), _side("b", ["bm25"], dict(plain)))
    with pytest.raises(InputError, match="different data"):
        check_same_data(_side("a", ["bm25"], plain), _side("b", ["bm25"], {**plain, **change}))


def test_one_named_method_must_be_on_the_other_side():
    a = _side("runA", ["bm25", "oracle"], None, method="oracle")
    assert pairs(a, _side("runB", ["oracle"], None)) == [("oracle", "oracle")]
    with pytest.raises(InputError, match="runB has no method 'oracle'"):
        pairs(a, _side("runB", ["bm25"], None))
    b = _side("runB", ["bm25", "oracle"], None, method="bm25")
    with pytest.raises(InputError, match="runA has no method 'bm25'"):
        pairs(_side("runA", ["oracle"], None), b)
