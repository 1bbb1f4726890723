"""The cross-encoder reranking stage. No cross-encoder weights exist offline, so MiniLM is loaded with a fresh
one-label head: the scores are meaningless and only the mechanics are checked."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.config import load_config
from t2rag.methods import get_method
from t2rag.pipeline.local import LocalRunner
from t2rag.retrieval.reranker import CrossEncoderScorer, RerankerConfig
from tests.conftest import question_batch

pytestmark = pytest.mark.slow


def test_rerank_stage_reorders_the_dense_pool(sample, minilm_reranker):
    config = load_config(None, {"data": {"subsets": ["FinQA"]}, "retrieval": {"reranker": minilm_reranker}})
    engine = LocalRunner(config)
    batch = question_batch(sample, "FinQA", "reranker", 6)
    method = get_method("reranker")
    assert method.stages == ("embed_queries", "retrieve", "rerank")
    pooled = engine.apply(method.stages[:-1], batch)
    pools = pooled.column("context_ids").to_pylist()
    assert all(len(p) == 9 for p in pools)  # the rerank stage asks retrieval for 3 x k candidates

    reranked = engine.apply(("rerank",), pooled)
    ids, scores = reranked.column("context_ids").to_pylist(), reranked.column("scores").to_pylist()
    corpus = engine.resources.corpus("FinQA")
    scorer = CrossEncoderScorer(RerankerConfig(**minilm_reranker))
    questions = batch.column("question").to_pylist()
    for row in range(6):
        assert len(ids[row]) == 9 and set(ids[row]) <= set(pools[row])  # the whole pool, reordered
        assert np.all(np.diff(scores[row]) <= 0)  # in descending cross-encoder score
        direct = scorer.score([questions[row]] * 9, corpus.texts_of(pools[row]))
        assert ids[row] == [pools[row][i] for i in np.argsort(-direct, kind="stable")]
    gold = batch.column("context_id").to_pylist()
    ranks = reranked.column("gold_rank").to_pylist()
    assert all(r == (ids[i].index(gold[i]) + 1 if gold[i] in ids[i] else 0) for i, r in enumerate(ranks))


def test_scores_tokenized_ahead_equal_predict(sample, minilm_reranker):
    """The look-ahead path (the CUDA default) tokenizes with sentence-transformers' own preprocess in the same
    length order, so its scores equal CrossEncoder.predict's exactly."""
    from t2rag.data.corpus import build_corpus

    corpus = build_corpus(sample, "TAT-DQA")
    questions = sample.subset("TAT-DQA").table.column("question").to_pylist()[:5]
    texts = corpus.texts[:7]
    pairs = [(q, t) for q in questions for t in texts]
    scorers = [CrossEncoderScorer(RerankerConfig(**minilm_reranker, tokenize_ahead=a)) for a in (False, True)]
    assert scorers[1].tokenize_ahead and not scorers[0].tokenize_ahead
    predicted, ahead = (s.score(*zip(*pairs, strict=True)) for s in scorers)
    assert predicted.shape == (35,) and np.unique(predicted).size > 30
    np.testing.assert_array_equal(ahead, predicted)
