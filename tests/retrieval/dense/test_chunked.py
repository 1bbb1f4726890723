"""Chunked dense retrieval: max-pooled LanceDB search equals a brute-force max over every chunk's cosine."""

from __future__ import annotations

import numpy as np

from t2rag.data import build_corpora, load_questions
from t2rag.retrieval.dense.chunked import ChunkedDenseRetriever, best_per_doc, chunk_corpus
from t2rag.retrieval.dense.chunking import ChunkingConfig
from t2rag.retrieval.dense.embedder import EmbedderConfig
from t2rag.retrieval.dense.hashing_embedder import HashingEmbedder
from t2rag.retrieval.dense.vector_store import VectorStore

HASHING = EmbedderConfig(model="hashing", max_seq_length=96)


def test_best_per_doc_keeps_first_appearances_in_rank_order() -> None:
    indices = np.array([[4, 4, 2, 7, 2, 1], [3, -1, -1, -1, -1, -1]])
    scores = np.array([[0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0.3] + [np.nan] * 5])
    hits = best_per_doc(indices, scores, 3)
    assert hits.indices.tolist() == [[4, 2, 7], [3, -1, -1]]
    assert hits.scores[0].tolist() == [0.9, 0.7, 0.6]


def test_search_equals_brute_force_max_pool(tmp_path) -> None:
    questions = load_questions(None)
    corpus = build_corpora(questions)["FinQA"]
    config = ChunkingConfig(overlap_tokens=16)
    retriever = ChunkedDenseRetriever(HASHING, str(tmp_path), chunking=config)
    retriever.index(corpus)
    chunks, docs = chunk_corpus(corpus, HASHING, config)
    assert len(chunks) > 2 * len(corpus) and retriever.most_per_doc > 1  # the contexts really were cut

    embedder = HashingEmbedder(HASHING)
    texts = questions.subset("FinQA").table.column("question").to_pylist()[:120]
    q = embedder.embed_queries(texts)
    cosine = q @ embedder.embed_passages(chunks.texts).T  # (questions x chunks)
    pooled = np.full((len(texts), len(corpus)), -np.inf)
    for d in range(len(corpus)):
        pooled[:, d] = cosine[:, docs == d].max(axis=1)

    hits = retriever.search(texts, k=3, depth=10)
    for row in range(len(texts)):
        expected = pooled[row][hits.indices[row]]
        np.testing.assert_allclose(hits.scores[row], expected, atol=1e-5)  # each score is its context's best chunk
        tenth = np.sort(pooled[row])[::-1][9]
        assert (pooled[row][hits.indices[row]] >= tenth - 1e-5).all()  # and they are the 10 best contexts
        assert len(set(hits.indices[row].tolist())) == 10


def test_chunk_table_is_reused_with_each_row_naming_its_context(tmp_path) -> None:
    corpus = build_corpora(load_questions(None))["TAT-DQA"]
    first = ChunkedDenseRetriever(HASHING, str(tmp_path))
    first.index(corpus)
    (plan,) = first.dense_passages(corpus)
    stored = VectorStore(str(tmp_path)).db.open_table(plan.table).to_arrow()
    assert stored.num_rows == len(plan.passages) > len(corpus)
    assert stored.column("doc").to_pylist() == plan.docs.tolist()
    assert stored.column("context_id").to_pylist() == [corpus.context_ids[d] for d in plan.docs]
    again = ChunkedDenseRetriever(HASHING, str(tmp_path))
    again.index(corpus)  # reuses the table: nothing to embed
    assert again._embedder is None
