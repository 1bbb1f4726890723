"""Dense retrieval in LanceDB against a brute-force cosine search on the same real vectors."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.retrieval import MIN_DEPTH, Embedder, EmbedderConfig, QueryBlock, build_retriever
from t2rag.retrieval.dense.embedder import E5_INSTRUCTION
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.ranking import top_n

pytestmark = pytest.mark.slow


def test_embeddings_are_normalised(finqa_embedded):
    _, passages, _, queries = finqa_embedded
    assert passages.dtype == np.float32 and passages.shape[1] == 384
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)


def test_lancedb_topk_equals_brute_force(finqa_embedded, tmp_path):
    corpus, passages, questions, queries = finqa_embedded
    dense = DenseRetriever(EmbedderConfig(), index_uri=str(tmp_path / "db"))
    dense.index(corpus, vectors=passages)
    hits = dense.search(QueryBlock(questions, queries), k=10, depth=10)

    sims = queries.astype(np.float64) @ passages.astype(np.float64).T
    expected, expected_scores = top_n(sims, 10)
    np.testing.assert_allclose(hits.scores, expected_scores, atol=2e-5)
    differs = hits.indices != expected
    # Only float32 near-ties may swap places.
    gaps = np.abs(np.take_along_axis(sims, hits.indices, 1) - expected_scores)
    assert (gaps[differs] < 2e-5).all()
    assert differs.mean() < 0.01


def test_index_is_reused_for_the_same_corpus_and_model(finqa_embedded, tmp_path, minilm):
    corpus, passages, questions, queries = finqa_embedded
    uri = str(tmp_path / "db")
    first = DenseRetriever(minilm, index_uri=uri)
    first.index(corpus, vectors=passages)
    calls = []

    class CountingEmbedder(Embedder):
        def embed_passages(self, texts):
            calls.append(len(texts))
            return super().embed_passages(texts)

    second = DenseRetriever(CountingEmbedder(minilm.config), index_uri=uri)
    second.index(corpus)
    assert calls == []  # reused, not re-embedded
    np.testing.assert_array_equal(
        second.search(QueryBlock(questions[:20], queries[:20]), 3).indices,
        first.search(QueryBlock(questions[:20], queries[:20]), 3).indices,
    )
    other = DenseRetriever(CountingEmbedder(minilm.config), index_uri=uri)
    other.index(corpus.select(list(range(40))))
    assert calls == [40]  # a different corpus fingerprint builds its own table


def test_templates_and_presets():
    e5 = EmbedderConfig(model="intfloat/multilingual-e5-large-instruct")
    query, passage = e5.templates()
    assert query.format(text="What was revenue?") == f"Instruct: {E5_INSTRUCTION}\nQuery: What was revenue?"
    assert passage == "{text}"
    custom = EmbedderConfig(model="x", query_template="q: {text}")
    assert custom.templates() == ("q: {text}", "{text}")
    assert EmbedderConfig().cache_key != EmbedderConfig(max_seq_length=128).cache_key


def test_dense_retriever_embeds_queries_itself(finqa_embedded, tmp_path, minilm):
    corpus, passages, questions, queries = finqa_embedded
    dense = build_retriever("base")
    dense.index_uri = str(tmp_path / "db")
    dense.index(corpus, vectors=passages)
    with_text = dense.search(questions[:10], 3)
    with_vectors = dense.search(QueryBlock(questions[:10], queries[:10]), 3)
    np.testing.assert_array_equal(with_text.indices, with_vectors.indices)
    assert with_text.indices.shape == (10, MIN_DEPTH)  # deep enough for MRR@k and Recall@k up to k = 10
