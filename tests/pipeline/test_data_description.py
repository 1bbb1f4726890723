"""Which corpus a run used: every split by default (the paper's setting), one split on request, in the manifest,
the result and `t2rag data stats`."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.pipeline.local import run_local
from tests.conftest import real_table, write_layout


@pytest.fixture(scope="module")
def two_splits(tmp_path_factory):
    """FinQA dev as split dev, and again as split test with its own ids and contexts (the hub's layout)."""
    root = tmp_path_factory.mktemp("two_splits")
    dev = real_table("FinQA")
    test = dev
    for column, value in (("id", "test-"), ("context_id", "t-"), ("split", None)):
        new = (
            pa.array(["test"] * dev.num_rows) if value is None else pc.binary_join_element_wise(value, dev[column], "")
        )
        test = test.set_column(test.schema.get_field_index(column), column, new)
    write_layout(root, {"FinQA": dev}, split="dev")
    write_layout(root, {"FinQA": test}, split="test")
    return str(root)


def _run(data, out, **data_fields):
    fields = {"data": {"source": data, **data_fields}, "methods": ["bm25"], "retrieval_only": True, "out": str(out)}
    return run_local(load_config(None, fields))


def test_every_split_is_searched_against_all_of_the_subsets_contexts(two_splits, tmp_path):
    result = _run(two_splits, tmp_path / "all")
    described = {"splits": ["dev", "test"], "questions": 2 * 883, "contexts": 2 * 299}
    assert result["data"]["subsets"] == {"FinQA": described}
    manifest = json.loads((tmp_path / "all" / "manifest.json").read_text())
    assert manifest["data"]["subsets"]["FinQA"] == described
    assert result["methods"]["bm25"]["weighted"]["retrieved"] == 2 * 883


def test_a_config_may_narrow_to_one_split(two_splits, tmp_path):
    result = _run(two_splits, tmp_path / "test", split="test")
    assert result["data"]["subsets"]["FinQA"] == {"splits": ["test"], "questions": 883, "contexts": 299}


def test_data_stats_shows_splits_and_counts(two_splits, capsys):
    assert main(["data", "stats", "--data", two_splits, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["subsets"]["FinQA"]
    assert (stats["splits"], stats["questions"], stats["contexts"]) == (["dev", "test"], 1766, 598)
    assert main(["data", "stats", "--data", two_splits]) == 0
    assert "| FinQA  | dev, test |      1766 |      598 |" in capsys.readouterr().out
