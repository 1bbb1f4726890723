"""Retrieval metrics: hand-worked values, an independent implementation (ir-measures), and the no-resort rule."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_measures import RR, R, nDCG

from t2rag.metrics import gold_ranks, mrr_at_k, ndcg_at_k, recall_at_k


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


def test_no_questions_is_no_score_quietly():
    """An empty subset scores NaN (not 0, which would read as a real score), without NumPy's empty-mean warning."""
    import warnings

    from t2rag.metrics.retrieval import mrr_at_k, recall_at_k

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(mrr_at_k(np.array([], dtype=np.int64), 3))
        assert math.isnan(recall_at_k(np.array([], dtype=np.int64), 3))


@pytest.mark.parametrize("name", ["mrr@0", "foo@3", "mrr@", "mrr", "recall@3@4", "ndcg@x"])
def test_a_metric_name_must_be_a_known_metric_at_a_positive_k(name):
    from t2rag.metrics.retrieval import parse_metric

    with pytest.raises(ValueError, match=rf"unknown retrieval metric '{name}' \(use mrr@k, recall@k or ndcg@k\)"):
        parse_metric(name)


def test_gold_ranks_read_every_form_of_ranked_lists():
    import pyarrow as pa

    from t2rag.metrics.retrieval import gold_ranks, hits_at_k

    lists, gold, want = [["a", "b"], None, ["c"], []], ["b", "x", "d", "e"], [2, 0, 0, 0]
    got = gold_ranks(lists, gold)
    assert got.tolist() == want and got.dtype == np.int64
    typed = pa.list_(pa.string())
    assert gold_ranks(pa.array(lists, typed), np.array(gold, dtype=object)).tolist() == want
    chunked = pa.chunked_array([pa.array(lists[:2], typed), pa.array(lists[2:], typed)])
    assert gold_ranks(chunked, gold).tolist() == want
    assert gold_ranks(pa.chunked_array([], typed), []).tolist() == []
    assert gold_ranks([[1, 2]], ["2"]).tolist() == [2]  # ids given as numbers are compared as text
    assert gold_ranks(pa.array([[1, 2]], pa.list_(pa.int64())), ["2"]).tolist() == [2]
    assert gold_ranks(pa.chunked_array([pa.array([[3, 1]], pa.list_(pa.int64()))]), ["1"]).tolist() == [2]
    with pytest.raises(ValueError, match="2 ranked lists but 1 gold ids"):
        gold_ranks([["a"], ["b"]], ["a"])
    assert hits_at_k(np.array([0, 1, 3]), 2).dtype == np.float64
