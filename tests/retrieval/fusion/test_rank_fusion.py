"""The paper's Hybrid BM25 fusion (hand-worked) and RRF against LanceDB's RRFReranker."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lancedb.rerankers import RRFReranker

from t2rag.retrieval import HybridConfig
from t2rag.retrieval.base import Hits
from t2rag.retrieval.fusion.rank_fusion import paper_hybrid, rrf


def _hits(rows):
    width = max(len(r) for r in rows)
    idx = np.array([r + [-1] * (width - len(r)) for r in rows], dtype=np.int64)
    return Hits(idx, np.where(idx >= 0, 1.0, np.nan))


def test_paper_hybrid_hand_worked():
    dense = _hits([[2, 0, 4]])
    bm25 = np.array([[4.0, 0.0, 2.0, 8.0, 0.0]])
    out = paper_hybrid(dense, bm25, k=3, depth=5)
    # dense part: doc2 1, doc0 2/3, doc4 1/3; bm25 part: bm25 / 8.
    # fused: doc2 .5+.125=.625, doc0 .3333+.25=.5833, doc3 0+.5=.5, doc4 .1667; doc1 is no candidate.
    assert out.indices.tolist() == [[2, 0, 3, 4, -1]]
    np.testing.assert_allclose(out.scores[0, :4], [0.625, 7 / 12, 0.5, 1 / 6])
    assert np.isnan(out.scores[0, 4])


def test_paper_hybrid_ties_break_by_dense_rank_then_bm25():
    dense = _hits([[0, 1]])
    # doc0: .5*1 + 0 = .5; doc1: .5*.5 + .5*.5 = .5; doc2: .5*1 (bm25 max) = .5 -> all tie at 0.5.
    bm25 = np.array([[0.0, 2.0, 4.0]])
    out = paper_hybrid(dense, bm25, k=2, depth=3)
    assert out.indices.tolist() == [[0, 1, 2]]


def test_paper_hybrid_uses_only_dense_top_k_even_when_more_is_returned():
    dense = _hits([[0, 1, 2, 3, 4]])
    bm25 = np.zeros((1, 5))
    out = paper_hybrid(dense, bm25, k=3, depth=5)
    assert out.indices.tolist() == [[0, 1, 2, -1, -1]]  # documents 3 and 4 are outside D and have no BM25 score


def test_weights_must_sum_to_one():
    with pytest.raises(ValueError, match="alpha \\+ beta must be 1"):
        HybridConfig(alpha=0.7, beta=0.7)


def test_rrf_matches_lancedb_rrf_reranker():
    rng = np.random.default_rng(3)
    n_docs = 40
    for _ in range(30):
        a = rng.permutation(n_docs)[: rng.integers(1, 15)].tolist()
        b = rng.permutation(n_docs)[: rng.integers(1, 15)].tolist()
        ours = rrf([_hits([a]), _hits([b])], n_docs, depth=n_docs)
        vec = pa.table(
            {
                "_rowid": pa.array(a, pa.uint64()),
                "_distance": pa.array(np.linspace(0, 1, len(a)), pa.float32()),
            }
        )
        fts = pa.table(
            {"_rowid": pa.array(b, pa.uint64()), "_score": pa.array(np.linspace(1, 0, len(b)), pa.float32())}
        )
        theirs = RRFReranker(K=60).rerank_hybrid("q", vec, fts)
        their_ids = theirs["_rowid"].to_pylist()
        their_scores = theirs["_relevance_score"].to_numpy()
        valid = ours.indices[0] >= 0
        assert sorted(ours.indices[0][valid].tolist()) == sorted(their_ids)
        score_of = dict(zip(their_ids, their_scores.tolist(), strict=True))
        for doc, score in zip(ours.indices[0][valid], ours.scores[0][valid], strict=True):
            assert score == pytest.approx(score_of[int(doc)], rel=1e-6)
        # Same order wherever the scores are not (float32-)tied.
        ours_scores = ours.scores[0][valid]
        strictly = np.diff(ours_scores) < -1e-6
        assert all(
            their_ids.index(int(ours.indices[0][i])) < their_ids.index(int(ours.indices[0][i + 1]))
            for i in np.flatnonzero(strictly)
        )
