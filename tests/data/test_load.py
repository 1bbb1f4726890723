"""Loading and validating the real T2-RAGBench sample and broken variants of it."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from t2rag.data import build_corpora, load_questions, subset_stats
from t2rag.data.schema import QUESTION_SCHEMA
from t2rag.errors import DataError
from tests.conftest import real_table, write_layout


def test_bundled_sample_counts(sample):
    stats = subset_stats(sample)
    assert list(stats) == ["FinQA", "TAT-DQA"]
    assert (stats["FinQA"]["questions"], stats["FinQA"]["contexts"]) == (883, 299)
    assert (stats["TAT-DQA"]["questions"], stats["TAT-DQA"]["contexts"]) == (1142, 274)
    assert stats["FinQA"]["excluded"] == [] and stats["TAT-DQA"]["excluded"] == []
    assert stats["FinQA"]["non_numeric_answers"] == 0
    # Eight TAT-DQA answers are dates that the source mis-parsed as answers, e.g. "352-05-12".
    assert stats["TAT-DQA"]["non_numeric_answers"] == 8


def test_unified_schema_across_subsets(sample):
    table = sample.table
    for fld in QUESTION_SCHEMA:
        assert table.schema.field(fld.name).type == fld.type, fld.name
    fin = sample.subset("FinQA").table
    tat = sample.subset("TAT-DQA").table
    # report_year is int64 in FinQA's file and a string in TAT-DQA's: both are strings now.
    assert fin.column("report_year")[0].as_py() == "2008"
    assert tat.column("report_year").null_count == 0
    # Columns only FinQA has are null for TAT-DQA.
    assert tat.column("table").null_count == tat.num_rows
    assert fin.column("table").null_count == 0
    assert tat.column("company_cik").null_count == tat.num_rows


def test_answer_values_are_parsed(sample):
    fin = sample.subset("FinQA").table
    row = fin.filter(pc.equal(fin.column("id"), "finqa_dev_0"))
    assert row.column("answer_value")[0].as_py() == pytest.approx(127.4)
    tat = sample.subset("TAT-DQA").table
    bad = tat.filter(pc.is_null(tat.column("answer_value")))
    assert "tatqa_dev_10855" in bad.column("id").to_pylist()
    assert set(bad.column("program_answer").to_pylist()) >= {"352-05-12", "2021-12-12"}


def test_subset_and_split_selection():
    qs = load_questions(None, subsets=["TAT-DQA"], split="dev")
    assert qs.subsets == ["TAT-DQA"] and len(qs) == 1142
    with pytest.raises(DataError, match="split 'test'"):
        load_questions(None, split="test")
    with pytest.raises(DataError, match="ConvFinQA"):
        load_questions(None, subsets=["ConvFinQA"])


def test_missing_required_column_names_file_and_column(tmp_path):
    write_layout(tmp_path, {"FinQA": real_table("FinQA").drop_columns(["question"])})
    with pytest.raises(DataError) as info:
        load_questions(str(tmp_path))
    assert "FinQA/dev/dev-00000-of-00001.parquet" in str(info.value)
    assert "'question'" in str(info.value)


def test_duplicate_ids_are_an_error(tmp_path):
    table = real_table("FinQA").slice(0, 10)
    write_layout(tmp_path, {"FinQA": pa.concat_tables([table, table.slice(0, 2)])})
    with pytest.raises(DataError, match=r"duplicate question ids.*finqa_dev_0"):
        load_questions(str(tmp_path))


def test_empty_rows_are_kept_listed_and_excluded(tmp_path):
    table = real_table("TAT-DQA").slice(0, 20)
    questions = table.column("question").to_pylist()
    contexts = table.column("context").to_pylist()
    questions[3] = "   "
    contexts[5] = ""
    table = table.set_column(table.schema.get_field_index("question"), "question", pa.array(questions))
    table = table.set_column(table.schema.get_field_index("context"), "context", pa.array(contexts))
    write_layout(tmp_path, {"TAT-DQA": table})
    qs = load_questions(str(tmp_path))
    ids = table.column("id").to_pylist()
    assert len(qs) == 20  # nothing dropped
    assert subset_stats(qs)["TAT-DQA"]["excluded"] == [ids[3], ids[5]]
    assert qs.scored().num_rows == 18
    reasons = dict(zip(qs.table["id"].to_pylist(), qs.table["excluded_reason"].to_pylist(), strict=True))
    assert reasons[ids[3]] == "empty_question" and reasons[ids[5]] == "empty_context"


def test_context_conflicts_are_reported(tmp_path):
    table = real_table("FinQA").slice(0, 30)
    cids = table.column("context_id").to_pylist()
    dup_index = next(i for i in range(1, 30) if cids[i] in cids[:i])
    contexts = table.column("context").to_pylist()
    contexts[dup_index] = contexts[dup_index] + " (edited)"
    table = table.set_column(table.schema.get_field_index("context"), "context", pa.array(contexts))
    write_layout(tmp_path, {"FinQA": table})
    qs = load_questions(str(tmp_path))
    corpus = build_corpora(qs)["FinQA"]
    assert [c.context_id for c in corpus.conflicts] == [cids[dup_index]]
    assert subset_stats(qs)["FinQA"]["context_conflicts"] == 1


def test_unreadable_file_and_missing_directory(tmp_path):
    folder = tmp_path / "data" / "FinQA" / "dev"
    folder.mkdir(parents=True)
    (folder / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match="cannot read parquet"):
        load_questions(str(tmp_path))
    with pytest.raises(DataError, match="no such directory"):
        load_questions(str(tmp_path / "nowhere"))


def test_conv_finqa_layout_without_split_folder(tmp_path):
    table = real_table("FinQA").slice(0, 12)
    folder = tmp_path / "data" / "ConvFinQA"
    folder.mkdir(parents=True)
    import pyarrow.parquet as pq

    pq.write_table(table, folder / "turn-00000-of-00001.parquet")
    qs = load_questions(str(tmp_path), split="dev")
    assert qs.subsets == ["ConvFinQA"] and len(qs) == 12
