"""BM25 parity with rank_bm25 on every question of the bundled sample, and its edge cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from t2rag.data import build_corpora
from t2rag.retrieval import build_retriever
from t2rag.retrieval.lexical.bm25_matrix import BM25Matrix
from t2rag.retrieval.ranking import top_n
from t2rag.tokenize import numeric_tokenize, whitespace_tokenize


@pytest.fixture(scope="module")
def rank_bm25_scores(sample) -> dict[str, np.ndarray]:
    """rank_bm25's scores of every question of a subset against its corpus, computed once per subset."""
    scores: dict[str, np.ndarray] = {}
    for subset, corpus in build_corpora(sample).items():
        reference = BM25Okapi([whitespace_tokenize(t) for t in corpus.texts])
        questions = sample.subset(subset).table.column("question").to_pylist()
        scores[subset] = np.array([reference.get_scores(whitespace_tokenize(q)) for q in questions])
    return scores


@pytest.mark.parametrize(("subset", "build_chunk"), [("FinQA", 1 << 16), ("TAT-DQA", 1 << 16), ("FinQA", 40)])
def test_parity_with_rank_bm25_on_every_question(sample, rank_bm25_scores, subset, build_chunk, monkeypatch):
    from t2rag.retrieval.lexical import bm25, bm25_matrix

    monkeypatch.setattr(bm25_matrix, "BUILD_CHUNK", build_chunk)
    bm25._cached_matrix.cache_clear()
    corpus = build_corpora(sample)[subset]
    questions = sample.subset(subset).table.column("question").to_pylist()
    expected = rank_bm25_scores[subset]

    retriever = build_retriever("bm25")
    retriever.index(corpus)
    hits = retriever.search(questions, k=10, depth=10)
    got = retriever.scores(questions)

    np.testing.assert_array_equal(got, expected)  # bitwise: the same float operations in the same order
    # rank_bm25's ranking (score descending, ties in corpus order) against ours, for every question.
    ref_idx, ref_scores = top_n(expected, 10)
    assert np.array_equal(hits.indices, ref_idx)
    np.testing.assert_array_equal(hits.scores, ref_scores)
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
        np.testing.assert_array_equal(m.scores([query])[0], ref.get_scores(query.split()))


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
    assert numeric_tokenize("|up 13.2%|u.s.|") == ["up", "13.2", "%", "u", "s"]
    retriever = build_retriever("bm25")
    assert retriever.tokenizer == "whitespace"


def _dense_product(matrix: BM25Matrix, queries: list[str]) -> np.ndarray:
    """The path this replaced: a sparse (queries x terms) @ (terms x documents) product made dense (then top_n)."""
    import scipy.sparse as sp

    weights = sp.csr_matrix(np.stack([matrix.term_weights(t) for t in range(len(matrix.vocab))]))
    terms = matrix.query_terms(queries)
    indptr = np.concatenate([[0], np.cumsum([len(t) for t in terms])])
    ids = np.concatenate([np.asarray(t, np.int64) for t in terms])
    counts = sp.csr_matrix((np.ones(int(indptr[-1])), ids, indptr), shape=(len(queries), len(matrix.vocab)))
    return np.asarray((counts @ weights).todense())


def test_running_top_k_over_document_blocks_equals_the_dense_ranking(sample, monkeypatch):
    """An index built in chunks of 64 documents, searched in document blocks of 37 and query blocks of 5 on one
    thread and on two, with duplicated documents (exact ties across blocks), queries that match nothing and k beyond
    the corpus."""
    from t2rag.retrieval.lexical import bm25_matrix

    corpus = build_corpora(sample)["FinQA"]
    texts = corpus.texts + corpus.texts[:50]  # documents 0-49 tie with 300-349: the earlier must win
    questions = [*sample.subset("FinQA").table.column("question").to_pylist(), "zzqx", ""]
    monkeypatch.setattr(bm25_matrix, "BUILD_CHUNK", 64)  # built in six chunks
    matrix = BM25Matrix(texts)
    monkeypatch.setattr(bm25_matrix, "DOC_BLOCK", 37)
    monkeypatch.setattr(bm25_matrix, "BLOCK_VALUES", 37 * 5)
    assert len(matrix.doc_blocks()) == -(-len(texts) // 37)
    assert 0 < len(matrix.dense) < 0.1 * len(matrix.vocab)  # terms in a quarter of the documents are held dense
    dense, scored = _dense_product(matrix, questions), matrix.scores(questions)
    for threads, k in itertools.product((1, 2), (1, 10, 60)):
        index, scores = matrix.top_k(questions, k, threads=threads)
        ref_index, ref_scores = top_n(dense, k)
        np.testing.assert_array_equal(index, ref_index)
        np.testing.assert_allclose(scores, ref_scores, rtol=1e-12)
        np.testing.assert_array_equal(scores, top_n(scored, k)[1])
        assert index[-1].tolist() == index[-2].tolist() == list(range(k))  # nothing matches: all 0, corpus order
    small = BM25Matrix(["revenue grew", "net income", "revenue fell"])
    assert small.top_k(["revenue"], 10)[0].tolist() == [[0, 2, 1]]
