"""Fused retrieval: the weighted sum of its components, the same in question blocks of any size (in threads or
not), and a second stage on the first stage's candidates that loses no gold context the full scoring ranks in the
top 3."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data import build_corpora, load_questions
from t2rag.retrieval.base import MIN_DEPTH, Hits
from t2rag.retrieval.config import RetrievalConfig, build_retriever
from t2rag.retrieval.contained_pages import DEPTH
from t2rag.retrieval.fusion import weighted as fused
from t2rag.retrieval.page_evidence.features import PAGE_FEATURES
from t2rag.retrieval.ranking import top_n


def test_scaled_list_min_max_within_each_list() -> None:
    hits = Hits(np.array([[2, 0, 1], [1, -1, -1]]), np.array([[0.9, 0.5, 0.6], [0.7, np.nan, np.nan]]))
    np.testing.assert_allclose(fused.scaled_list(hits)[0], [1.0, 0.0, 0.25])
    assert fused.scaled_list(hits)[1, 0] == 0.0


@pytest.mark.parametrize("name", ["bm25_meta", "bm25_page", "bm25_focus"])
def test_search_is_the_weighted_sum_in_blocks_of_any_size(monkeypatch, name) -> None:
    """With every context a candidate of every stage, the search is the top of the weighted sum of the components
    (then, for a method that prefers held pages, such pages moved above their holders)."""
    questions = load_questions(None)
    corpus = build_corpora(questions)["TAT-DQA"]
    monkeypatch.setattr(fused, "PASSAGE_DEPTH", len(corpus))
    texts = questions.subset("TAT-DQA").table.column("question").to_pylist()[:300]
    retriever = build_retriever(name, RetrievalConfig.model_validate({"fusion": {"candidates": len(corpus)}}))
    retriever.index(corpus)
    whole = retriever.search(texts, 3)
    parts = retriever.components(texts)
    weights = retriever.weights
    assert set(parts) == set(weights.used())
    expected = sum(getattr(weights, c) * values.astype(np.float64) for c, values in parts.items())
    np.testing.assert_allclose(retriever.fused_scores(texts), expected, atol=1e-6)
    indices, scores = top_n(expected, MIN_DEPTH)
    if retriever.contained is not None:  # then a held page moves above its holder (t2rag.retrieval.contained_pages)
        page = [c for c in PAGE_FEATURES if c in parts]
        top = lambda row: np.array([parts[c][row, indices[row, :DEPTH]] for c in page])  # noqa: E731
        held, _ = retriever.contained.prefer_held(indices, scores, top)
        assert (held != indices).any(axis=1).sum() >= 3
        indices = held
    np.testing.assert_array_equal(whole.indices, indices)
    monkeypatch.setattr(fused, "FUSION_BYTES", 7 * fused.BYTES_PER_SCORE * len(corpus) * fused.SEARCH_THREADS)
    blocked = retriever.search(texts, 3)  # 7 questions a block, the blocks in SEARCH_THREADS threads
    np.testing.assert_array_equal(blocked.indices, whole.indices)
    np.testing.assert_array_equal(blocked.scores, whole.scores)
    monkeypatch.setattr(fused, "SEARCH_THREADS", 1)
    serial = retriever.search(texts, 3)
    np.testing.assert_array_equal(serial.indices, whole.indices)
    np.testing.assert_array_equal(serial.scores, whole.scores)


@pytest.mark.parametrize("name", ["hybrid_chunked", "hybrid_meta", "bm25_focus"])
def test_every_weight_scales_its_component(tmp_path, name) -> None:
    """Weights other than the fitted ones (lexical too, which the fits scale to 1) each scale their component."""
    questions = load_questions(None)
    corpus = build_corpora(questions)["FinQA"]
    texts = questions.subset("FinQA").table.column("question").to_pylist()[:40]
    fitted = fused.FITTED_WEIGHTS[name]
    factors = iter([1.7, 0.4, 2.3, 0.9, 1.3, 0.7, 1.9, 0.5, 1.1, 2.9, 0.3, 1.5])
    weights = {c: round(getattr(fitted, c) * next(factors), 3) for c in fitted.used()}
    config = RetrievalConfig.model_validate({
        "embedder": {"model": "hashing", "max_seq_length": 96}, "index_uri": str(tmp_path),
        "fusion": {"candidates": len(corpus), "weights": {name: weights}},
    })  # fmt: skip
    retriever = build_retriever(name, config)
    retriever.index(corpus)
    parts = retriever.components(texts)
    assert set(parts) == set(weights) and weights["lexical"] != 1.0
    expected = sum(weights[c] * values.astype(np.float64) for c, values in parts.items())
    np.testing.assert_allclose(retriever.fused_scores(texts), expected, atol=1e-6)


@pytest.fixture(scope="module")
def dev_sample():
    questions = load_questions(None)
    return questions, build_corpora(questions)


def _gold_in_top3(retriever, corpus, rows) -> np.ndarray:
    """Per question, whether its gold context is among the search's first three."""
    asked, gold = rows.column("question").to_pylist(), rows.column("context_id").to_pylist()
    top = retriever.search(asked, 3).indices[:, :3]
    return np.array([corpus.positions[g] in row for g, row in zip(gold, top, strict=True)])


@pytest.mark.parametrize("name", ["bm25_page", "bm25_focus"])
def test_the_candidate_stage_drops_no_gold_the_full_scoring_ranks_in_the_top_3(monkeypatch, dev_sample, name) -> None:
    """Every dev question whose gold context the unrestricted search (every context scored by every component, the
    third stage's too) ranks in the top 3 keeps it there with the shipped number of candidates and passage depth;
    with 2 candidates some would not, so this check can fail."""
    questions, corpora = dev_sample
    for subset, corpus in corpora.items():
        rows = questions.subset(subset).scored()
        full = build_retriever(name, RetrievalConfig.model_validate({"fusion": {"candidates": len(corpus)}}))
        full.index(corpus)
        shipped, narrow = (
            build_retriever(name, RetrievalConfig()),
            build_retriever(name, RetrievalConfig.model_validate({"fusion": {"candidates": 2}})),
        )
        shipped.index(corpus)
        narrow.index(corpus)
        with monkeypatch.context() as every:
            every.setattr(fused, "PASSAGE_DEPTH", len(corpus))
            expected = _gold_in_top3(full, corpus, rows)
        assert expected.mean() > 0.95
        assert not (expected & ~_gold_in_top3(shipped, corpus, rows)).any(), subset
        assert (expected & ~_gold_in_top3(narrow, corpus, rows)).any(), subset


def test_bm25_focus_reads_the_question_without_its_companys_words(dev_sample) -> None:
    """bm25_focus's lexical component is BM25 over each question less the words naming its company (its main change
    over bm25_page): equal to BM25 given those words to leave out, and not to BM25 over the whole question."""
    questions, corpora = dev_sample
    corpus = corpora["FinQA"]
    retriever = build_retriever("bm25_focus", RetrievalConfig())
    retriever.index(corpus)
    texts = questions.subset("FinQA").table.column("question").to_pylist()[:60]
    left_out = retriever.prior.company_words(texts)
    naming = [i for i, words in enumerate(left_out) if words]
    assert len(naming) > 30  # most questions name their company
    lexical = retriever.components(texts)["lexical"]
    without = retriever.lexical.scores(texts, left_out)
    whole = retriever.lexical.scores(texts, None)
    scale = lambda m: m / np.maximum(m.max(axis=1, keepdims=True), 1e-12)  # noqa: E731 - a question's best is 1
    np.testing.assert_allclose(lexical, scale(np.asarray(without, np.float64)), atol=1e-6)
    assert not np.allclose(lexical[naming], scale(np.asarray(whole, np.float64))[naming], atol=1e-3)


@pytest.mark.parametrize("name", ["bm25_page", "bm25_focus"])
def test_fewer_candidates_than_results_still_return_every_result(dev_sample, name) -> None:
    """With `fusion.candidates` below the depth asked for, the second stage scores as many documents as are asked
    for (the search width is at least the depth): every question gets its 10 results."""
    questions, corpora = dev_sample
    corpus = corpora["TAT-DQA"]
    retriever = build_retriever(name, RetrievalConfig.model_validate({"fusion": {"candidates": 2}}))
    retriever.index(corpus)
    hits = retriever.search(questions.subset("TAT-DQA").table.column("question").to_pylist()[:50], 3, depth=10)
    assert hits.indices.shape == (50, 10) and (hits.indices >= 0).all() and np.isfinite(hits.scores).all()


def test_passage_is_added_to_the_second_stages_best_alone(dev_sample) -> None:
    """bm25_focus's third stage: against the same weights without `passage`, a context's score rises by the
    weighted passage share where the second stage ranked it among the best PASSAGE_DEPTH, and not at all below."""
    questions, corpora = dev_sample
    corpus = corpora["TAT-DQA"]
    texts = questions.subset("TAT-DQA").table.column("question").to_pylist()[:200]
    shipped = build_retriever("bm25_focus", RetrievalConfig())
    weights = shipped.weights.model_copy(update={"passage": 0.0})
    second = build_retriever(
        "bm25_focus", RetrievalConfig.model_validate({"fusion": {"weights": {"bm25_focus": weights.model_dump()}}})
    )
    shipped.index(corpus)
    second.index(corpus)
    shipped.contained = second.contained = None  # no held page moved: the scores as the stages sum them
    depth = fused.PASSAGE_DEPTH + 5
    before, after = second.search(texts, 3, depth), shipped.search(texts, 3, depth)
    passage = shipped.page.candidate_features(shipped.read(texts).asked, before.indices, ("passage",))["passage"]
    raised = moved = 0
    for q in range(len(texts)):
        now = dict(zip(after.indices[q].tolist(), after.scores[q].tolist(), strict=True))
        for rank, (doc, score) in enumerate(zip(before.indices[q], before.scores[q], strict=True)):
            if doc not in now:
                continue
            added = shipped.weights.passage * float(passage[q, rank]) if rank < fused.PASSAGE_DEPTH else 0.0
            assert now[doc] == pytest.approx(score + added, abs=1e-9)
            raised += added > 0
        moved += list(before.indices[q, :3]) != list(after.indices[q, :3])
    assert raised > 500 and moved > 0
