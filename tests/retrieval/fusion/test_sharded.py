"""A fused retriever in shards, each indexed with the whole corpus's statistics alone, merged: the unsharded
ranking and scores, on real dev rows."""

import numpy as np
import pytest

from t2rag.config import load_config
from t2rag.data.distractors import extend, synthetic_contexts
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval import build_retriever
from t2rag.retrieval.base import shard_corpus
from t2rag.retrieval.fusion.sharded import CorpusFacts, ShardFacts, index_shard, merge_candidates, shard_candidates
from t2rag.retrieval.shards import shard_ranges


def _sharded(method: str, config, corpus, questions, shards: int, width: int):
    ranges = shard_ranges(len(corpus), shards)
    make = lambda: build_retriever(get_method(method).retriever, config.retrieval)  # noqa: E731
    facts = CorpusFacts.merge([ShardFacts.of(make(), shard_corpus(corpus, r)) for r in ranges])
    parts = []
    for r in ranges:  # each shard alone, as a task holding one would
        retriever = make()
        index_shard(retriever, shard_corpus(corpus, r), r, facts)
        parts.append(shard_candidates(retriever, questions, width, r.start))
    return merge_candidates(make(), parts, config.retrieval.k, contained=facts.contained)


@pytest.mark.parametrize("method", ["bm25_focus", "bm25_meta"])
def test_shards_merged_rank_and_score_as_the_whole_index(method):
    config = load_config(None, {"methods": [method], "retrieval_only": True})
    resources = Resources(config)
    for subset in ("FinQA", "TAT-DQA"):
        corpus = resources.corpus(subset)
        questions = resources.questions.subset(subset).scored().column("question").to_pylist()
        whole = build_retriever(get_method(method).retriever, config.retrieval)
        whole.index(corpus)
        expected = whole.search(questions, config.retrieval.k)
        hits, certified = _sharded(method, config, corpus, questions, shards=4, width=100)
        assert certified.all()
        np.testing.assert_array_equal(hits.indices, expected.indices)
        np.testing.assert_array_equal(hits.scores, expected.scores)


def test_a_question_is_certified_only_when_its_merge_is_exact():
    """Shards that return too few candidates leave some questions uncertified; every certified one is exact."""
    config = load_config(None, {"methods": ["bm25_focus"], "retrieval_only": True})
    resources = Resources(config)
    corpus = resources.corpus("TAT-DQA")
    questions = resources.questions.subset("TAT-DQA").scored().column("question").to_pylist()
    whole = build_retriever(get_method("bm25_focus").retriever, config.retrieval)
    whole.index(corpus)
    expected = whole.search(questions, config.retrieval.k)
    hits, certified = _sharded("bm25_focus", config, corpus, questions, shards=8, width=12)
    assert 0 < certified.sum() < len(questions)
    exact = (hits.indices == expected.indices).all(axis=1)
    assert exact[certified].all() and not exact.all()


@pytest.mark.slow
def test_shards_of_distractors_alone_are_certified_and_exact():
    """A shard of synthetic distractors scales BM25 by its own (lower) best, so its 100th candidate outscores the
    corpus's 50th under its own scaling; the bound of what it left out, scored under the corpus's bests, still
    certifies every question, and the merge is the whole index's."""
    config = load_config(None, {"methods": ["bm25_focus"], "retrieval_only": True})
    resources = Resources(config)
    corpus = extend(resources.corpus("FinQA"), synthetic_contexts(3000, seed=5))
    questions = resources.questions.subset("FinQA").scored().column("question").to_pylist()[:200]
    whole = build_retriever(get_method("bm25_focus").retriever, config.retrieval)
    whole.index(corpus)
    expected = whole.search(questions, config.retrieval.k)
    hits, certified = _sharded("bm25_focus", config, corpus, questions, shards=4, width=100)
    assert certified.all()
    np.testing.assert_array_equal(hits.indices, expected.indices)
    np.testing.assert_array_equal(hits.scores, expected.scores)


def test_a_bound_that_ties_the_last_candidate_does_not_certify(monkeypatch):
    """A left-out document that could score exactly the last candidate's score could take its place (ties break by
    position): a merge is certified only when its last candidate scores above every shard's bound, never at it."""
    from t2rag.retrieval.fusion import sharded as fused_shards
    from t2rag.retrieval.fusion.weighted import FirstStage

    config = load_config(None, {"methods": ["bm25_focus"], "retrieval_only": True})
    resources = Resources(config)
    corpus = resources.corpus("FinQA")
    questions = resources.questions.subset("FinQA").scored().column("question").to_pylist()[:40]
    ranges = shard_ranges(len(corpus), 2)
    make = lambda: build_retriever("bm25_focus", config.retrieval)  # noqa: E731
    facts = CorpusFacts.merge([ShardFacts.of(make(), shard_corpus(corpus, r)) for r in ranges])
    parts = []
    for r in ranges:
        retriever = make()
        index_shard(retriever, shard_corpus(corpus, r), r, facts)
        parts.append(shard_candidates(retriever, questions, 100, r.start))
    merger = make()
    width = min(max(merger.candidates, 10), sum(p.positions.shape[1] for p in parts))
    combined: list[np.ndarray] = []
    original = FirstStage.combine

    def recorded(self, *args, **kwargs):  # the merge's first call scores every shard's candidates
        out = original(self, *args, **kwargs)
        combined.append(out.copy())
        return out

    def last_candidate(shift: float):
        def bound(self, weights, best_lexical, best_item):
            first = np.sort(combined[0], axis=1)[:, ::-1]
            return first[:, width - 1] + shift  # a left-out document at (or just below) the last candidate's score

        return bound

    monkeypatch.setattr(FirstStage, "combine", recorded)
    monkeypatch.setattr(fused_shards.ShardCandidates, "bound", last_candidate(0.0))
    _, tied = merge_candidates(merger, parts, config.retrieval.k)
    assert not tied.any()
    combined.clear()
    monkeypatch.setattr(fused_shards.ShardCandidates, "bound", last_candidate(-1e-9))
    _, below = merge_candidates(merger, parts, config.retrieval.k)
    assert below.all()
