"""Token ids made without the model (a CPU tokenizing actor's work) are the embedder's own, and vectors embedded
from them equal the embedder's look-ahead path."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data import build_corpora
from t2rag.retrieval import EmbedderConfig
from t2rag.retrieval.dense.embed_tokenizer import EmbedTokenizer
from t2rag.retrieval.dense.embedder import Embedder
from t2rag.retrieval.dense.token_batches import WindowTokenizer

E5_STYLE = EmbedderConfig(query_template="query: {text}", passage_template="passage: {text}")


@pytest.fixture(scope="module")
def texts(sample) -> tuple[list[str], list[str]]:
    corpus = build_corpora(sample)["TAT-DQA"]
    return corpus.texts[:24], sample.subset("TAT-DQA").table.column("question").to_pylist()[:24]


def test_ids_are_the_embedders_own_with_its_templates_and_window(minilm, texts):
    passages, questions = texts
    tokenizer = EmbedTokenizer(E5_STYLE)
    assert tokenizer.max_length == minilm.model.max_seq_length == 256  # read from sentence_bert_config.json
    own = WindowTokenizer(minilm.model.tokenizer, 256)
    assert tokenizer.passages(passages) == own([f"passage: {t}" for t in passages])
    assert tokenizer.queries(questions) == own([f"query: {q}" for q in questions])
    assert EmbedTokenizer(EmbedderConfig(max_seq_length=64)).max_length == 64


def test_vectors_from_ids_equal_the_look_ahead_path(minilm, texts):
    passages, questions = texts
    config = E5_STYLE.model_copy(update={"tokenize_ahead": True, "tokens_per_batch": 2048})  # several batches
    embedder, tokenizer = Embedder(config), EmbedTokenizer(config)
    assert embedder.model is minilm.model
    np.testing.assert_array_equal(
        embedder.embed_token_ids(tokenizer.passages(passages)), embedder.embed_passages(passages)
    )
    np.testing.assert_array_equal(
        embedder.embed_token_ids(tokenizer.queries(questions)), embedder.embed_queries(questions)
    )
    assert embedder.embed_token_ids([]).shape == (0, 384)


def test_the_embedding_stages_take_ids_from_a_tokenizing_stage(texts, tmp_path):
    """tokenize_* then embed_* (Ray's split around GPU actors) gives what embed_* alone gives, for queries, HyDE
    documents embedded as passages, and corpus passages."""
    import pyarrow as pa

    from t2rag.config import load_config
    from t2rag.pipeline.local import LocalRunner

    passages, questions = texts
    embedder = {"tokenize_ahead": True, "tokens_per_batch": 8192}
    engine = LocalRunner(load_config(None, {"out": str(tmp_path), "retrieval": {"embedder": embedder}}))
    rows = pa.table({"question": questions[:6] * 2, "query_as_passage": [False] * 6 + [True] * 6})
    split = engine.apply(("tokenize_queries", "embed_queries"), rows)
    whole = engine.apply(("embed_queries",), rows)
    assert split.column("query_token_ids").to_pylist()[6] == engine.resources.embed_tokenizer.passages(questions[:1])[0]
    assert split.column("query_vector").equals(whole.column("query_vector"))
    corpus = pa.table({"text": passages[:10]})
    split = engine.apply(("tokenize_passages", "embed_passages"), corpus)
    assert split.column("vector").equals(engine.apply(("embed_passages",), corpus).column("vector"))
