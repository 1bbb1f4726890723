"""Fused retrieval: the weighted sum of its components, the same in question blocks of any size."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data import build_corpora, load_questions
from t2rag.retrieval import fused
from t2rag.retrieval.base import MIN_DEPTH, Hits
from t2rag.retrieval.config import RetrievalConfig, build_retriever
from t2rag.retrieval.ranking import top_n


def test_scaled_list_min_max_within_each_list() -> None:
    hits = Hits(np.array([[2, 0, 1], [1, -1, -1]]), np.array([[0.9, 0.5, 0.6], [0.7, np.nan, np.nan]]))
    np.testing.assert_allclose(fused.scaled_list(hits)[0], [1.0, 0.0, 0.25])
    assert fused.scaled_list(hits)[1, 0] == 0.0


@pytest.mark.parametrize("name", ["bm25_meta", "bm25_page"])
def test_search_is_the_weighted_sum_in_blocks_of_any_size(monkeypatch, name) -> None:
    questions = load_questions(None)
    corpus = build_corpora(questions)["TAT-DQA"]
    texts = questions.subset("TAT-DQA").table.column("question").to_pylist()[:300]
    retriever = build_retriever(name, RetrievalConfig())
    retriever.index(corpus)
    whole = retriever.search(texts, 3)
    parts = retriever.components(texts)
    weights = retriever.weights
    assert set(parts) == set(weights.used())
    expected = sum(getattr(weights, c) * values.astype(np.float64) for c, values in parts.items())
    np.testing.assert_allclose(retriever.fused_scores(texts), expected, atol=1e-6)
    indices, _ = top_n(expected, MIN_DEPTH)
    np.testing.assert_array_equal(whole.indices, indices)
    monkeypatch.setattr(fused, "FUSION_BYTES", 7 * fused.BYTES_PER_SCORE * len(corpus))  # 7 questions a block
    blocked = retriever.search(texts, 3)
    np.testing.assert_array_equal(blocked.indices, whole.indices)
    np.testing.assert_array_equal(blocked.scores, whole.scores)
