"""The example plugin's own tests: its retriever on t2rag's bundled sample, its settings, and its registration."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from t2rag_char_tfidf import CHAR_TFIDF, TFIDF_FOCUS, CharTfidfRetriever, CharTfidfSettings

from t2rag.data import load_questions
from t2rag.data.corpus import build_corpus
from t2rag.extend import QueryBlock


@pytest.fixture(scope="module")
def finqa():
    questions = load_questions(subsets=["FinQA"])  # the bundled dev sample
    return questions, build_corpus(questions, "FinQA")


def test_it_ranks_the_gold_context_near_the_top_for_most_questions(finqa):
    questions, corpus = finqa
    retriever = CharTfidfRetriever()
    retriever.index(corpus)
    table = questions.scored()
    hits = retriever.search(QueryBlock(table.column("question").to_pylist()), k=3)
    ids = np.asarray(corpus.context_ids)[hits.indices[:, :3]]
    gold = np.asarray(table.column("context_id").to_pylist())[:, None]
    recall_at_3 = float((ids == gold).any(axis=1).mean())
    assert recall_at_3 > 0.85  # 89.5% on the 883 FinQA dev questions
    assert (np.diff(hits.scores, axis=1) <= 1e-12).all()  # best first


def test_a_corpus_shorter_than_the_depth_is_padded(finqa):
    _, corpus = finqa
    retriever = CharTfidfRetriever(CharTfidfSettings(ngram_min=2, ngram_max=3))
    retriever.index(corpus.select([0, 1, 2], "three"))
    hits = retriever.search(["net revenue"], k=3)
    assert hits.indices.shape == (1, 10) and (hits.indices[0, 3:] == -1).all() and np.isnan(hits.scores[0, 3:]).all()
    assert sorted(hits.indices[0, :3].tolist()) == [0, 1, 2]


def test_settings_refuse_an_empty_range():
    with pytest.raises(ValidationError, match="ngram_min 6 is above ngram_max 5"):
        CharTfidfSettings(ngram_min=6)


def test_what_it_registers():
    assert CHAR_TFIDF.settings is CharTfidfSettings
    assert TFIDF_FOCUS.retrievers == ("char_tfidf", "bm25_focus")


def test_the_reranker_puts_the_page_that_shares_the_questions_rare_words_first():
    """Two candidates that share their common words: the one that also holds the question's distinctive word wins
    over the one ranked above it (its order score is 1/2 below, the cosine's gap larger at weight 2)."""
    from t2rag_char_tfidf.rerank import TfidfRerankSettings, rerank_scores

    pages = ["total net revenue by segment in 2019", "goodwill impairment of the segment in 2019"]
    first, second = rerank_scores("what was the goodwill impairment?", pages, TfidfRerankSettings(weight=2.0))
    assert second > first
    unweighted = rerank_scores("what was the goodwill impairment?", pages, TfidfRerankSettings(weight=0.0))
    assert unweighted == [1.0, 0.5]  # the order alone
