"""Where stages run on Ray, decided without Ray: these start no cluster, so they run with the fast tests
(`CLUSTERLESS` in tests/conftest.py)."""

from __future__ import annotations

from ray_jobs.capacity import Node
from ray_jobs.placement import pool_kind, segments
from ray_jobs.preflight import check_fit
from t2rag.config import load_config
from t2rag.pools import PoolShape, PoolSpec
from tests.conftest import HASHING


def test_light_stages_join_the_retrieval_unless_each_retrieval_actor_holds_one_shard(tmp_path):
    whole = load_config(None, {"out": str(tmp_path), "retrieval": HASHING})
    sharded = load_config(None, {"out": str(tmp_path), "retrieval": {**HASHING, "shards": 2}})
    assert pool_kind("read_contexts", whole) == "retrieve"
    assert pool_kind("read_contexts", sharded) == "light"
    chain = ("retrieve", "read_contexts", "answer_prompts")
    assert segments(chain, whole) == [chain]
    assert segments(chain, sharded) == [("retrieve",), ("read_contexts", "answer_prompts")]


def test_an_index_pool_must_fit_beside_the_generator_service():
    """The generator is held for the whole run: a passage pool that fits the cluster alone but not beside the
    service's replicas does not fit."""
    service = PoolSpec("run", "generator", ("generate",), "m", PoolShape(6, 1.0, 1.0, gpus_together=1), "vllm")
    passages = PoolSpec("index", "passages", ("embed_passages",), "e", PoolShape(1, 1.0, 1.0))
    six = [Node("head", 8, 0), Node("gpus", 64, 6)]
    fits = check_fit([service, passages], six)
    (index,) = [fit for phase, fit in fits.items() if phase.startswith("index:")]
    assert not index.fits and index.needed["GPU"] == 7
    assert all(fit.fits for fit in check_fit([service, passages], [Node("gpus", 64, 7)]).values())
