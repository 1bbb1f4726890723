"""Retrieval metrics: hand-worked values, an independent implementation (ir-measures), and the no-resort rule."""

from __future__ import annotations

import ir_measures
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_measures import RR, R, nDCG

from t2rag.metrics import gold_ranks, mrr_at_k, ndcg_at_k, recall_at_k, summarize


def test_gold_ranks_hand_worked():
    ranked = [["a", "b", "c"], ["c", "a"], ["x", "y", "z"], [], None, ["g", "g", "b"]]
    gold = ["a", "a", "q", "a", "a", "g"]
    assert gold_ranks(ranked, gold).tolist() == [1, 2, 0, 0, 0, 1]


def test_metric_values_hand_worked():
    ranks = np.array([1, 2, 3, 0, 5])
    assert mrr_at_k(ranks, 3) == pytest.approx((1 + 1 / 2 + 1 / 3) / 5)
    assert mrr_at_k(ranks, 5) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 5) / 5)
    assert recall_at_k(ranks, 1) == pytest.approx(1 / 5)
    assert recall_at_k(ranks, 3) == pytest.approx(3 / 5)
    assert recall_at_k(ranks, 5) == pytest.approx(4 / 5)
    assert ndcg_at_k(ranks, 3) == pytest.approx((1 + 1 / np.log2(3) + 1 / np.log2(4)) / 5)


def test_rank_is_position_not_score_order():
    # BM25 ties: all scores equal. The metric must use the order given, not re-sort by score.
    ranked = [["d1", "d2", "gold"]]
    assert gold_ranks(ranked, ["gold"]).tolist() == [3]
    assert mrr_at_k(gold_ranks(ranked, ["gold"]), 3) == pytest.approx(1 / 3)


def test_sliced_arrow_lists():
    import pyarrow as pa

    arr = pa.array([["a"], ["b", "a"], ["c", "d", "a"]], pa.list_(pa.string())).slice(1)
    assert gold_ranks(arr, ["a", "a"]).tolist() == [2, 3]


def _ir_measures(ranked, gold, measure):
    qrels = [ir_measures.Qrel(str(q), g, 1) for q, g in enumerate(gold)]
    # Strictly decreasing scores so ir-measures' score order equals the given position order.
    run = [
        ir_measures.ScoredDoc(str(q), doc, float(len(docs) - pos))
        for q, docs in enumerate(ranked)
        for pos, doc in enumerate(docs)
    ]
    per_query = {m.query_id: m.value for m in measure.iter_calc(qrels, run)}
    return np.array([per_query.get(str(q), 0.0) for q in range(len(gold))])


docs = st.sampled_from([f"c{i}" for i in range(12)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(docs, max_size=8, unique=True), docs), min_size=1, max_size=25))
def test_agrees_with_ir_measures(cases):
    ranked = [r for r, _ in cases]
    gold = [g for _, g in cases]
    ranks = gold_ranks(ranked, gold)
    for k in (1, 3, 5):
        assert mrr_at_k(ranks, k) == pytest.approx(_ir_measures(ranked, gold, RR @ k).mean())
        assert recall_at_k(ranks, k) == pytest.approx(_ir_measures(ranked, gold, R @ k).mean())
        assert ndcg_at_k(ranks, k) == pytest.approx(_ir_measures(ranked, gold, nDCG @ k).mean())


def test_summary_weighted_average_is_question_weighted():
    subsets = np.array(["FinQA"] * 3 + ["TAT-DQA"] * 1, dtype=object)
    ranks = np.array([1, 0, 0, 1])
    preds = np.array([1.0, 2.0, np.nan, 5.0])
    refs = np.array([1.0, 3.0, 1.0, 5.0])
    out = summarize(subsets, predictions=preds, references=refs, ranks=ranks, retrieval_metrics=("recall@1",))
    assert out["subsets"]["FinQA"]["recall@1"] == pytest.approx(100 / 3, abs=1e-3)
    assert out["subsets"]["TAT-DQA"]["recall@1"] == 100.0
    assert out["weighted"]["recall@1"] == pytest.approx(50.0)  # (3 * 33.33 + 1 * 100) / 4, not (33.33 + 100) / 2
    assert out["weighted"]["number_match"] == pytest.approx(50.0)
    assert out["weighted"]["questions"] == 4


def test_summary_real_sample_perfect_and_empty_retrieval(sample):
    table = sample.scored()
    gold = table.column("context_id").to_pylist()
    subsets = np.array(table.column("subset").to_pylist(), dtype=object)
    perfect = summarize(subsets, ranks=gold_ranks([[g, "other"] for g in gold], gold))
    assert perfect["weighted"]["mrr@3"] == 100.0 and perfect["subsets"]["FinQA"]["retrieved"] == 883
    second = summarize(subsets, ranks=gold_ranks([["other", g] for g in gold], gold))
    assert second["weighted"]["mrr@3"] == 50.0 and second["weighted"]["recall@1"] == 0.0
