"""The one scoring route: summaries from records (runs, reports and `t2rag score` all use it)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from t2rag.metrics import gold_ranks, number_match
from t2rag.results.numbers import summarize_records
from t2rag.results.records import to_records


def _records(subsets, ranks=None, predictions=None, references=None) -> pa.Table:
    n = len(subsets)
    columns: dict[str, object] = {"id": [f"q{i}" for i in range(n)], "subset": list(subsets), "method": ["m"] * n}
    if ranks is not None:
        columns["gold_rank"] = pa.array(np.asarray(ranks, dtype=np.int32))
    if predictions is not None:
        columns["number_match"] = pa.array(number_match(predictions, references))
        columns["reference"] = pa.array(references, pa.float64(), from_pandas=True)
    return to_records(pa.table(columns))


def test_weighted_average_is_question_weighted():
    subsets = ["FinQA"] * 3 + ["TAT-DQA"]
    preds = np.array([1.0, 2.0, np.nan, 5.0])
    refs = np.array([1.0, 3.0, 1.0, 5.0])
    out = summarize_records(_records(subsets, [1, 0, 0, 1], preds, refs), ("recall@1",))["m"]
    assert out["subsets"]["FinQA"]["recall@1"] == pytest.approx(100 / 3, abs=1e-3)
    assert out["subsets"]["TAT-DQA"]["recall@1"] == 100.0
    assert out["weighted"]["recall@1"] == pytest.approx(50.0)  # (3 * 33.33 + 1 * 100) / 4, not (33.33 + 100) / 2
    assert out["weighted"]["number_match"] == pytest.approx(50.0)
    assert out["weighted"]["questions"] == 4


def test_real_sample_perfect_and_second_place_retrieval(sample):
    table = sample.scored()
    gold = table.column("context_id").to_pylist()
    subsets = table.column("subset").to_pylist()
    perfect = summarize_records(_records(subsets, gold_ranks([[g, "other"] for g in gold], gold)))["m"]
    assert perfect["weighted"]["mrr@3"] == 100.0 and perfect["subsets"]["FinQA"]["retrieved"] == 883
    assert "number_match" not in perfect["weighted"]  # nothing was generated
    second = summarize_records(_records(subsets, gold_ranks([["other", g] for g in gold], gold)))["m"]
    assert second["weighted"]["mrr@3"] == 50.0 and second["weighted"]["recall@1"] == 0.0
