"""BM25 parity with rank_bm25 on every question of the bundled sample, and its edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from t2rag.data import build_corpora
from t2rag.retrieval import build_retriever
from t2rag.retrieval.bm25_matrix import BM25Matrix
from t2rag.retrieval.ranking import top_n
from t2rag.retrieval.tokenize import numeric_tokenize, whitespace_tokenize


@pytest.mark.parametrize("subset", ["FinQA", "TAT-DQA"])
def test_parity_with_rank_bm25_on_every_question(sample, subset):
    corpus = build_corpora(sample)[subset]
    questions = sample.subset(subset).table.column("question").to_pylist()
    reference = BM25Okapi([whitespace_tokenize(t) for t in corpus.texts])
    expected = np.array([reference.get_scores(whitespace_tokenize(q)) for q in questions])

    retriever = build_retriever("bm25")
    retriever.index(corpus)
    hits = retriever.search(questions, k=10, depth=10)
    got = retriever.scores(questions)

    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=0)
    # rank_bm25's ranking (score descending, ties in corpus order) against ours, for every question.
    ref_idx, ref_scores = top_n(expected, 10)
    assert np.array_equal(hits.indices, ref_idx)
    np.testing.assert_allclose(hits.scores, ref_scores, rtol=1e-9)
    assert hits.context_ids(corpus)[0][0] in corpus.context_ids


def test_negative_idf_floor_repeated_and_unknown_terms():
    docs = ["apple apple pear", "apple kiwi", "apple banana", "plum"]
    tokenized = [d.split() for d in docs]
    ref = BM25Okapi(tokenized)
    m = BM25Matrix(docs)
    # "apple" is in 3 of 4 documents: negative idf, floored to epsilon * mean idf.
    assert m.idf[m.vocab["apple"]] == pytest.approx(ref.idf["apple"])
    assert ref.idf["apple"] == pytest.approx(0.25 * ref.average_idf)
    for query in ["apple", "apple apple kiwi", "durian", "", "kiwi kiwi kiwi plum"]:
        np.testing.assert_allclose(m.scores([query])[0], ref.get_scores(query.split()), rtol=1e-12, atol=1e-15)


def test_empty_documents_and_queries():
    m = BM25Matrix(["", "revenue grew", "net income"])
    assert m.scores(["revenue"]).shape == (1, 3)
    assert m.scores([]).shape == (0, 3)
    assert m.scores(["   "]).sum() == 0


def test_number_aware_tokenizer_is_an_option():
    assert whitespace_tokenize("Revenue was $1,234.5 in 2019.") == [
        "revenue",
        "was",
        "$1,234.5",
        "in",
        "2019.",
    ]
    assert numeric_tokenize("Revenue was $1,234.5 in 2019.") == ["revenue", "was", "1234.5", "in", "2019"]
    retriever = build_retriever("bm25")
    assert retriever.tokenizer == "whitespace"
