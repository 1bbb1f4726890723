"""The actor pools and engines a Ray run places, listed without Ray from the same functions that place them.

`run_pools` walks a run's plan the way `ray_jobs.evaluate` and `ray_jobs.build_index` place it (`split_chain`,
`shared_chain`, `steps`), so what `t2rag plan` lists and checks against a cluster is what the run asks Ray for.
The generator service is held for the whole run (phase `run`); `index` places its pools one after another
(passage embedding), `evaluate` places all of its pools at once (Ray Data streams through every operator together).
"""

from __future__ import annotations

from ray_jobs.generator_service import generator_placement
from ray_jobs.placement import Step, pool_kind, shared_chain, steps, with_cpu_tokenizing
from t2rag.config import RunConfig
from t2rag.methods import ANSWER_TAIL, get_method
from t2rag.pools import PoolShape, PoolSpec
from t2rag.stages.work import WorkGroup, split_chain


def run_pools(config: RunConfig, work: list[WorkGroup], corpora: int, passages: bool) -> list[PoolSpec]:
    """Every pool a Ray run of `work` places. `corpora`: how many corpora get context summaries, `passages`:
    whether dense indexes are built. The generator service (phase "run") is held through both phases."""
    summaries = corpora and any(get_method(m).index_texts == "summary" for m in config.methods)
    out: list[PoolSpec] = []
    if summaries or any("generate" in g.stages for g in work):
        out.append(generator_pool(config))
    if passages:
        out += _pools(with_cpu_tokenizing(("embed_passages",), config), config, "index")
    retrieval_only, answering = [], []
    for group in work:
        own, rest, answers = split_chain(group.stages)
        out += _pools(with_cpu_tokenizing(own, config), config, "evaluate")
        (answering if answers else retrieval_only).append(with_cpu_tokenizing(rest, config))
    for chains in (retrieval_only, answering):
        if not chains:
            continue
        merged = shared_chain(chains)
        for chain in [merged] if merged is not None else chains:
            out += _pools(chain, config, "evaluate")
    if answering:
        out += _pools(ANSWER_TAIL, config, "evaluate")
    return out


def generator_pool(config: RunConfig) -> PoolSpec:
    """The run's generator service: its replicas, each loading the model once."""
    g = config.generator
    assert g is not None
    return PoolSpec("run", "generator", ("generate",), g.model, generator_placement(config), engine=g.engine)


ROLES = {
    "embed_queries": "queries",
    "embed_passages": "passages",
    "tokenize_queries": "tokenize",
    "tokenize_passages": "tokenize",
    "rerank": "rerank",
    "retrieve": "retrieve",
}


def _pools(stages: tuple[str, ...], config: RunConfig, phase: str) -> list[PoolSpec]:
    return [_pool(step, config, phase) for step in steps(stages, config) if step.how == "actors"]


def _pool(step: Step, config: RunConfig, phase: str) -> PoolSpec:
    first = step.segment[0]
    pool = step.pool
    assert pool is not None
    plugins = plugin_code(step.segment, config)
    return PoolSpec(
        phase,
        "retrieve" if "retrieve" in step.segment else ROLES.get(first, _plugin_role(pool_kind(first, config))),
        step.segment,
        None if first in plugins else _model(pool_kind(first, config), config),  # a plugin loads its own
        PoolShape(pool.actors * step.shards, pool.cpus, pool.gpus),
        plugins=plugins,
    )


def _plugin_role(kind: str | None) -> str:
    """The role of a pool whose first stage is a plugin's: a reranker's in the rerank pool, else light work."""
    return "rerank" if kind == "rerank" else "light"


def plugin_code(segment: tuple[str, ...], config: RunConfig) -> tuple[str, ...]:
    """The plugins' stages of a segment and, where it retrieves, the plugins' retrievers of the run's methods."""
    used = config.plugins_used()
    stages = [s for s in segment if s in used.get("stages", {})]
    return tuple(stages + (list(used.get("retrievers", {})) if "retrieve" in segment else []))


def _model(kind: str | None, config: RunConfig) -> str | None:
    if kind == "embed":
        return config.retrieval.embedder.model
    if kind == "rerank":
        return config.retrieval.reranker.model
    return None
