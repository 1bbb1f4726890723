"""Where stages run on Ray, checked without a cluster: pools per kind, CPU tokenizing, shards, and the shared pass
that lets rows of several chains use one pool per stage."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ray_jobs import placement
from ray_jobs.placement import (
    COLUMNS,
    NEEDS,
    SharedActor,
    actor_class,
    merged_chain,
    pool_for,
    segments,
    shard_configs,
    tagger,
    with_cpu_tokenizing,
)
from t2rag.config import load_config
from t2rag.methods import DENSE, LEXICAL, METHODS
from t2rag.pipeline.local import LocalRunner
from t2rag.stages import STAGES
from tests.conftest import HASHING, question_batch


def test_ray_places_each_run_of_one_kind_in_one_actor(tmp_path):
    hyde = METHODS["hyde"].chain(True)
    assert segments(hyde, load_config(None, {"out": str(tmp_path)})) == [
        ("hyde_prompts",),
        ("generate",),
        ("hyde_query",),
        ("embed_queries",),
        ("retrieve", "read_contexts", "answer_prompts"),  # stages without a model join the retrieval's actors
        ("generate",),
        ("parse_answers",),
    ]
    # The hashing embedder holds no weights: it embeds in the retrieval's actors too.
    hashing = load_config(None, {"out": str(tmp_path), "retrieval": HASHING})
    assert segments(hyde, hashing) == [
        ("hyde_prompts",),
        ("generate",),
        ("hyde_query", "embed_queries", "retrieve", "read_contexts", "answer_prompts"),
        ("generate",),
        ("parse_answers",),
    ]
    # A sharded retrieval's actors hold one shard each: nothing else runs in them.
    sharded = load_config(None, {"out": str(tmp_path), "retrieval": {**HASHING, "shards": 2}})
    assert segments(hyde, sharded) == [
        ("hyde_prompts",),
        ("generate",),
        ("hyde_query",),
        ("embed_queries",),
        ("retrieve",),
        ("read_contexts", "answer_prompts"),
        ("generate",),
        ("parse_answers",),
    ]


def test_ray_tokenizes_for_gpu_embedding_actors_on_cpu_actors(tmp_path):
    gpu = load_config(None, {"out": str(tmp_path), "ray": {"embed_gpus": 1}})
    assert segments(with_cpu_tokenizing(METHODS["reranker"].stages, gpu), gpu) == [
        ("tokenize_queries",),
        ("embed_queries",),
        ("retrieve",),
        ("rerank",),
    ]
    assert with_cpu_tokenizing(("embed_passages",), gpu) == ("tokenize_passages", "embed_passages")
    cpu = load_config(None, {"out": str(tmp_path)})
    assert with_cpu_tokenizing(DENSE, cpu) == DENSE  # a CPU embedder tokenizes ahead itself, or not at all
    forced = load_config(None, {"out": str(tmp_path), "ray": {"tokenize_on_cpu": True}})
    assert pool_for(STAGES["tokenize_queries"].pool, forced).gpus == 0
    assert with_cpu_tokenizing(DENSE, forced) == ("tokenize_queries", *DENSE)
    hashing = {"out": str(tmp_path), "retrieval": {"embedder": {"model": "hashing"}}}
    for ray in ({"embed_gpus": 1}, {"tokenize_on_cpu": True}):  # no tokenizer to run ahead
        assert with_cpu_tokenizing(DENSE, load_config(None, {**hashing, "ray": ray})) == DENSE


def test_ray_gives_each_shard_of_a_sharded_retrieval_its_own_pool(tmp_path):
    config = load_config(None, {"out": str(tmp_path), "retrieval": {"shards": 3}})
    assert [c.retrieval.shard for c in shard_configs(("retrieve",), config)] == [0, 1, 2]
    assert shard_configs(("embed_queries",), config) == [config]
    assert shard_configs(("retrieve",), load_config(None, {"out": str(tmp_path)}))[0].retrieval.shard is None


def test_chains_merge_into_one_pass_in_the_order_rows_meet_the_stages():
    hyde_rest = METHODS["hyde"].chain(False)[2:]  # after its query generation
    merged = merged_chain([LEXICAL, DENSE, METHODS["reranker"].stages, hyde_rest, ("read_contexts", "answer_prompts")])
    assert merged == ("hyde_query", "embed_queries", "retrieve", "rerank", "read_contexts", "answer_prompts")
    assert merged_chain([("retrieve", "embed_queries")]) is None  # out of order: placed apart
    assert merged_chain([METHODS["hyde"].chain(True)]) is None  # generates twice


@pytest.fixture
def no_cluster(monkeypatch):
    """Runners called in this process: no Ray worker to size, no meter to report to."""
    monkeypatch.setattr(placement, "use_held_cpus", lambda torch_threads: 1)
    monkeypatch.setattr(placement, "report", lambda *args: None)
    monkeypatch.setattr(placement, "count_loads_on_meter", lambda: None)


def test_a_shared_pass_gives_every_row_its_own_chain_and_columns(sample, tmp_path, no_cluster):
    """bm25 rows, base rows and base rows with a query text of their own (as HyDE's) in one batch, mixed as Ray Data
    mixes blocks (a column some rows lack is null for them): each ranks as its own chain ranks it alone."""
    fields = {"out": str(tmp_path), "methods": ["bm25", "base"], "retrieval_only": True, "retrieval": HASHING}
    config = load_config(None, fields)  # what is tested is which chain ranks a row, not the vectors
    bm25 = question_batch(sample, "FinQA", "bm25", 5)
    base = question_batch(sample, "FinQA", "base", 5)
    rewritten = question_batch(sample, "FinQA", "base", 9).slice(5)
    rewritten = rewritten.append_column("query_text", pa.array([f"revenue and {q}" for q in rewritten["question"]]))
    parts = [(bm25, LEXICAL), (base, DENSE), (rewritten, DENSE)]

    mixed = pa.concat_tables([tagger(chain)(rows) for rows, chain in parts], promote_options="default")
    assert mixed.column("query_text").null_count == 10  # what a stage must not read as the rows' query
    runner = actor_class(DENSE, SharedActor)(config.model_dump_json())
    out = runner(mixed)

    engine = LocalRunner(config)
    assert out.num_rows == mixed.num_rows
    for rows, chain in parts:
        alone = engine.apply(chain, rows)
        mine = out.filter(pc.is_in(out.column("question"), alone.column("question")))
        mine = mine.filter(pc.equal(mine.column("method"), rows.column("method")[0]))
        real = mine.column(COLUMNS)[0].as_py().split(",")
        assert set(real) == {*alone.column_names, NEEDS, COLUMNS}  # the columns its own chain gives it, no more
        assert all(mine.column(c).null_count == mine.num_rows for c in mine.column_names if c not in real)
        assert mine.select(alone.column_names).to_pylist() == alone.to_pylist()
