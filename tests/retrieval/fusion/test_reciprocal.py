"""Reciprocal-rank fusion of registered retrievers (a config's `rank_fusion:` entry, a plugin's RankFusion)."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data.corpus import build_corpus
from t2rag.retrieval import build_retriever
from t2rag.retrieval.fusion.reciprocal import RankFusionRetriever


def test_the_fused_score_is_the_sum_of_reciprocal_ranks_of_every_member(sample):
    corpus = build_corpus(sample, "TAT-DQA")
    questions = sample.scored().column("question").to_pylist()[:50]
    members = [build_retriever("bm25"), build_retriever("bm25_numeric")]
    fused = RankFusionRetriever("mix", members, k_rrf=60, candidates=len(corpus))  # every context ranked by each
    fused.index(corpus)
    got = fused.search(questions, k=3)
    ranked = [m.search(questions, k=3, depth=len(corpus)) for m in members]
    for q in range(len(questions)):
        expected = np.zeros(len(corpus))
        for hits in ranked:
            expected[hits.indices[q]] += 1.0 / (60 + 1 + np.arange(len(corpus)))
        assert np.allclose(got.scores[q], expected[got.indices[q]])
        assert np.isclose(got.scores[q, 0], expected.max())


def test_it_fuses_two_retrievers_or_more_and_reads_vectors_when_a_member_does():
    with pytest.raises(ValueError, match="needs two retrievers or more"):
        RankFusionRetriever("one", [build_retriever("bm25")])
    both = RankFusionRetriever("both", [build_retriever("bm25"), build_retriever("base")])
    assert both.needs_query_vectors
