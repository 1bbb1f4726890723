"""Sharded retrieval: shards merged exactly equal the unsharded ranking, for BM25 (shards built with the whole
corpus's statistics) and flat dense search, in one process and as Ray's chain of shard actors runs it."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.config import load_config
from t2rag.data import build_corpus
from t2rag.data.corpus import Corpus
from t2rag.pipeline.local import LocalRunner
from t2rag.retrieval import EmbedderConfig, build_retriever
from t2rag.retrieval.base import Hits, QueryBlock
from t2rag.retrieval.config import RetrievalConfig
from t2rag.retrieval.dense.embedder import make_embedder
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.lexical.bm25_matrix import BM25Statistics
from t2rag.retrieval.shards import ShardedRetriever, merge_hits, shard_ranges
from tests.conftest import question_batch


def _with_copies(corpus: Corpus) -> Corpus:
    """The corpus plus copies of its first 40 documents at the end: exact ties that cross shard boundaries."""
    order = list(range(len(corpus))) + list(range(40))
    copy = corpus.select(order)
    ids = tuple(f"{cid}#{i}" for i, cid in enumerate(copy.context_ids))
    return Corpus(corpus.name, ids, copy.subsets, copy.texts)


def test_shard_ranges_cover_the_corpus_once():
    assert shard_ranges(10, 3) == [range(0, 3), range(3, 7), range(7, 10)]
    assert shard_ranges(2, 4) == [range(0, 1), range(1, 2)]
    assert sum(len(r) for r in shard_ranges(1001, 7)) == 1001


def test_merge_orders_by_score_then_position_and_pads():
    a = Hits(np.array([[4, 9, -1]]), np.array([[2.0, 1.0, np.nan]]))
    b = Hits(np.array([[1, 7, 12]]), np.array([[2.0, 1.5, 1.0]]))
    merged = merge_hits([a, b], 5)
    assert merged.indices.tolist() == [[1, 4, 7, 9, 12]]
    assert merge_hits([a], 4).indices.tolist() == [[4, 9, -1, -1]]


def test_statistics_of_pieces_merge_into_the_whole(sample):
    texts = build_corpus(sample, "TAT-DQA").texts
    whole = BM25Statistics.of(texts)
    merged = BM25Statistics.merge([BM25Statistics.of(texts[a:b]) for a, b in [(0, 100), (100, 101), (101, None)]])
    assert list(merged.vocab) == list(whole.vocab)  # first-seen order, which the mean idf is summed in
    np.testing.assert_array_equal(merged.doc_freq, whole.doc_freq)
    assert (merged.n_docs, merged.total_length) == (whole.n_docs, whole.total_length)


@pytest.mark.parametrize("shards", [2, 3, 7])
def test_bm25_shards_equal_the_unsharded_ranking(sample, shards):
    corpus = _with_copies(build_corpus(sample, "FinQA"))
    questions = [*sample.subset("FinQA").table.column("question").to_pylist(), "", "zzqx"]
    whole = build_retriever("bm25")
    whole.index(corpus)
    sharded = build_retriever("bm25", RetrievalConfig(shards=shards))
    assert isinstance(sharded, ShardedRetriever)
    sharded.index(corpus)
    for depth in (5, 60):
        expected, got = whole.search(questions, 3, depth), sharded.search(questions, 3, depth)
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_array_equal(got.scores, expected.scores)  # bitwise: same weights, same sums


def test_flat_dense_shards_equal_the_unsharded_ranking(sample, tmp_path):
    """On the hashing embedder's vectors of the real FinQA corpus and questions: the merge is what is tested, and
    any unit vectors rank alike however they were made."""
    hashing = EmbedderConfig(model="hashing")
    corpus, embedder = build_corpus(sample, "FinQA"), make_embedder(hashing)
    vectors = embedder.embed_passages(corpus.texts)
    query_vectors = embedder.embed_queries(sample.subset("FinQA").table.column("question").to_pylist())
    whole = DenseRetriever(hashing, index_uri=str(tmp_path))
    whole.index(corpus, vectors)
    sharded = ShardedRetriever(lambda: DenseRetriever(hashing, index_uri=str(tmp_path)), 4)
    sharded.index(corpus, vectors)
    expected, got = (
        whole.search_vectors(query_vectors, 10),
        sharded.search(QueryBlock([""] * len(query_vectors), query_vectors), 3, 10),
    )
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_allclose(got.scores, expected.scores, rtol=1e-6)


def test_a_chain_of_shard_stages_equals_one_retrieve_stage(sample, tmp_path):
    """What Ray runs: one retrieve stage per shard (each process indexing only its shard), each merging into the
    running list of the shards before; the last writes the ranking."""
    batch = question_batch(sample, "FinQA", "bm25", 40)
    base = {"out": str(tmp_path), "data": {"subsets": ["FinQA"]}}
    expected = LocalRunner(load_config(None, base)).apply(("retrieve",), batch)
    for shard in range(3):
        config = load_config(None, {**base, "retrieval": {"shards": 3, "shard": shard}})
        batch = LocalRunner(config).apply(("retrieve",), batch)
        assert ("shard_positions" in batch.column_names) is (shard < 2)
    for name in ("context_ids", "scores", "gold_rank"):
        assert batch.column(name).equals(expected.column(name))
    with pytest.raises(ValueError, match="not below"):
        RetrievalConfig(shards=2, shard=2)


def test_a_retriever_that_cannot_shard_says_so(sample):
    sharded = build_retriever("hybrid_rrf", RetrievalConfig(shards=2))
    with pytest.raises(ValueError, match="cannot be sharded"):
        sharded.index(build_corpus(sample, "FinQA"))
