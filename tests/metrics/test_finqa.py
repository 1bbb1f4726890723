"""FinQA's execution accuracy on real FinQA dev rows: the value at 5 decimals, sign and power of ten counting."""

from __future__ import annotations

import pytest

from t2rag.metrics import number_match_one
from t2rag.metrics.finqa import execution_match
from tests.conftest import real_table

ROWS = real_table("FinQA").select(["id", "program_answer"]).to_pylist()
REFERENCES = {r["id"]: float(r["program_answer"]) for r in ROWS}


@pytest.mark.parametrize(
    ("qid", "reference", "prediction", "exe", "nm"),
    [
        ("finqa_dev_0", 127.4, 127.400004, True, True),  # 127.40000 both sides at 5 decimals
        ("finqa_dev_0", 127.4, 127.40001, False, True),  # 127.40001: FinQA's rounding is stricter than NM's 1%
        ("finqa_dev_0", 127.4, -127.4, False, True),  # the sign counts
        ("finqa_dev_1", 0.935, 93.5, False, True),  # so does the power of ten
        ("finqa_dev_2", 24.691358024691358, 24.6913580, True, True),  # 24.69136 both sides
        ("finqa_dev_2", 24.691358024691358, 24.69, False, True),
        ("finqa_dev_10", 0.1999999999999993, 0.2, True, True),
        ("finqa_dev_10", 0.1999999999999993, None, False, False),
    ],
)
def test_execution_accuracy_on_real_rows(qid, reference, prediction, exe, nm):
    assert REFERENCES[qid] == reference
    assert execution_match(prediction, REFERENCES[qid]) is exe
    assert number_match_one(prediction, REFERENCES[qid]) is nm


def test_every_gold_value_executes_to_itself_and_nan_never_does():
    for value in REFERENCES.values():
        assert execution_match(value, value)
    assert not execution_match(float("nan"), float("nan"))
    assert not execution_match(1.0, None)


@pytest.mark.parametrize(
    ("predicted", "gold", "same"),
    [
        # FinQA's own example (section 3): the order of arguments and of independent steps does not matter
        ("add(1, 2), add(3, 4), subtract(#0, #1)", "add(4, 3), add(2, 1), subtract(#1, #0)", True),
        ("(5829 - 5735) / 5735", "subtract(5829, 5735), divide(#0, 5735)", True),  # infix is read as a program
        ("divide(5829, 5735)", "divide(5735, 5829)", False),
        ("divide(subtract(5829, 5735), 5735)", "divide(subtract(5829, 5734), 5735)", False),  # another argument
        ("table_sum(net revenue, none)", "table_sum(Net  Revenue, none)", True),
        ("greater(3, 2)", "greater(2, 3)", False),
        ("None", "add(1, 2)", False),
        (None, "add(1, 2)", False),
    ],
)
def test_program_accuracy_reads_arguments_as_symbols(predicted, gold, same):
    from t2rag.metrics.finqa import program_match

    assert program_match(predicted, gold) is same


def test_a_source_with_gold_programs_scores_program_accuracy(tmp_path, tiny_data):
    """A hub-layout copy whose FinQA rows carry a `program` column: the scripted answers that write the gold
    program's computation are right by program accuracy, the others wrong; TAT-DQA rows have no program."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from t2rag.answer.numerals import parse_number
    from t2rag.config import load_config
    from t2rag.pipeline.local import run_local
    from t2rag.run_folder.files import read_records
    from tests.conftest import write_layout
    from tests.scripted_server import scripted_for

    tables = {s: pq.read_table(next((Path(tiny_data) / "data" / s).rglob("*.parquet"))) for s in ("FinQA", "TAT-DQA")}
    finqa = tables["FinQA"]
    values = [parse_number(v) for v in finqa.column("program_answer").to_pylist()]
    tables["FinQA"] = finqa.append_column("program", pa.array([f"add(0, {v!r})" for v in values]))
    data = str(write_layout(tmp_path / "programs", tables))
    with scripted_for(data) as generator:
        config = load_config(None, {"data": {"source": data}, "methods": ["oracle"], "generator": generator,
                                    "out": str(tmp_path / "run")})  # fmt: skip
        card = run_local(config)["methods"]["oracle"]
    records = read_records(str(tmp_path / "run")).to_pylist()
    for r in records:
        if r["subset"] == "TAT-DQA":
            assert r["program_acc"] is None
        else:  # the scripted right answer writes add(reference, 0): the gold's computation, arguments swapped
            assert r["program_acc"] is (r["formula"] == f"add({r['reference']!r}, 0)")
    finqa_rows = [r for r in records if r["subset"] == "FinQA"]
    assert card["subsets"]["FinQA"]["program_scored"] == len(finqa_rows)
    right = sum(r["program_acc"] for r in finqa_rows)
    assert 0 < right < len(finqa_rows)
    assert card["subsets"]["FinQA"]["program_acc"] == pytest.approx(100 * right / len(finqa_rows), abs=1e-3)
    assert "program_acc" not in card["subsets"]["TAT-DQA"]
