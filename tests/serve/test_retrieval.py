"""The serving replica's retrieval (no Ray): batches of mixed methods rank exactly as the batch runners ranks, a query
past its deadline is dropped before any work, and one bad query fails alone."""

from __future__ import annotations

import math
import time

import pyarrow as pa
import pytest

from serve.retrieval import DeadlineExceeded, Query, RetrievalService
from t2rag.errors import InputError
from t2rag.methods import METHODS, get_method

SUBSET = "FinQA"
ROWS = 100
METHOD_NAMES = ("bm25", "base", "hybrid_rrf")


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    from t2rag.config import load_config
    from tests.conftest import HASHING, real_table, write_layout

    root = write_layout(tmp_path_factory.mktemp("finqa"), {SUBSET: real_table(SUBSET).slice(0, ROWS)})
    index = tmp_path_factory.mktemp("index")
    retrieval = {"index_uri": str(index), **HASHING}  # what is tested is the ranking's path, not MiniLM's vectors
    return load_config(None, {"data": {"source": str(root)}, "generator": None, "retrieval": retrieval})


@pytest.fixture(scope="module")
def service(config):
    from t2rag.resources import Resources

    service = RetrievalService(Resources(config), [METHODS[name] for name in ("oracle", *METHOD_NAMES)])
    service.build()
    return service


@pytest.fixture(scope="module")
def questions(service) -> list[str]:
    return service.resources.questions.scored().column("question").to_pylist()[:6]


def test_only_retrieving_methods_are_held(service):
    assert list(service.methods) == list(METHOD_NAMES)
    assert service.corpora == [SUBSET]


def test_a_mixed_batch_ranks_like_the_batch_engine(config, service, questions):
    from t2rag.pipeline.local import LocalRunner

    engine = LocalRunner(config)
    queries = [
        Query(q, name, SUBSET, 3 + i % 2, False, math.inf) for i, q in enumerate(questions) for name in METHOD_NAMES
    ]
    rankings = service.rank(queries)
    for name in METHOD_NAMES:
        mine = [(q, r) for q, r in zip(queries, rankings, strict=True) if q.method == name]
        batch = pa.table(
            {
                "question": [q.question for q, _ in mine],
                "subset": [SUBSET] * len(mine),
                "method": [name] * len(mine),
                "k": pa.array([q.k for q, _ in mine], pa.int64()),
            }
        )
        ranked = engine.apply(get_method(name).stages, batch)
        for (query, ranking), ids, scores in zip(
            mine, ranked.column("context_ids").to_pylist(), ranked.column("scores").to_pylist(), strict=True
        ):
            assert [c["context_id"] for c in ranking.contexts] == ids[: query.k]
            assert [c["score"] for c in ranking.contexts] == pytest.approx(scores[: query.k], rel=1e-6)
            assert all("text" not in c and c["subset"] == SUBSET for c in ranking.contexts)
    dense = next(r for q, r in zip(queries, rankings, strict=True) if q.method == "base")
    assert set(dense.seconds) == {"queue", "embed_queries", "retrieve"}  # one encoder call for the dense methods


def test_texts_only_when_asked_and_failures_stay_with_their_query(service, questions):
    expired = time.monotonic() - 1.0
    queries = [
        Query(questions[0], "bm25", SUBSET, 2, True, math.inf),
        Query(questions[1], "bm25", SUBSET, 2, False, expired),
        Query(questions[2], "bm25", "TAT-DQA", 2, False, math.inf),
        Query(questions[3], "base", SUBSET, 1, False, math.inf),
    ]
    with_text, late, unknown, dense = service.rank(queries)
    corpus = service.resources.corpus(SUBSET)
    assert [c["text"] for c in with_text.contexts] == corpus.texts_of([c["context_id"] for c in with_text.contexts])
    assert isinstance(late, DeadlineExceeded) and "deadline passed" in str(late)
    assert isinstance(unknown, InputError) and "unknown corpus 'TAT-DQA'" in str(unknown)
    assert len(dense.contexts) == 1


def test_a_served_router_searches_the_subset_it_ranks_first(tmp_path):
    """Over two loaded subsets, `bm25@semantic` routes each served question (no subset known) to one subset's
    corpus and ranks as bm25 does there; `bm25@llm` searches the subset its reply (asked by the ingress) ranks first;
    the oracle router is not served (a served question has no subset), nor the LLM one without a generator."""
    from serve.settings import offline_reason
    from t2rag.config import load_config
    from t2rag.resources import Resources
    from tests.conftest import HASHING, real_table, write_layout

    root = write_layout(tmp_path / "data", {s: real_table(s).slice(0, 60) for s in ("FinQA", "TAT-DQA")})
    retrieval = {"index_uri": str(tmp_path / "index"), **HASHING}
    config = load_config(None, {"data": {"source": str(root)}, "generator": None, "retrieval": retrieval})
    service = RetrievalService(Resources(config), [get_method("bm25"), get_method("bm25@semantic")])
    service.build()
    questions = service.resources.questions.scored().column("question").to_pylist()[::20]
    routed = service.rank([Query(q, "bm25@semantic", "pooled", 3, False, math.inf) for q in questions])
    for question, ranking in zip(questions, routed, strict=True):
        assert ranking.corpus in ("FinQA", "TAT-DQA")
        assert {c["subset"] for c in ranking.contexts} == {ranking.corpus}
        (own,) = service.rank([Query(question, "bm25", ranking.corpus, 3, False, math.inf)])
        assert [c["context_id"] for c in ranking.contexts] == [c["context_id"] for c in own.contexts]
    assert "subset" in offline_reason(get_method("bm25@oracle"), config)
    assert "no generator" in offline_reason(get_method("bm25@llm"), config)  # an app with one serves it
    assert offline_reason(get_method("bm25@semantic"), config) is None
    llm = RetrievalService(Resources(config), [get_method("bm25@llm")])  # the reply comes with the query
    for reply, corpus in (('{"ranking": ["TAT-DQA", "FinQA"]}', "TAT-DQA"), ("FinQA, surely", "FinQA")):
        (ranking,) = llm.rank([Query(questions[0], "bm25@llm", "pooled", 3, False, math.inf, route_reply=reply)])
        assert ranking.corpus == corpus and {c["subset"] for c in ranking.contexts} == {corpus}
