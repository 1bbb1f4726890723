"""The actor pools and engines a Ray run places, listed without Ray from the same functions that place them.

`run_pools` walks a run's plan the way `ray_jobs.evaluate` and `ray_jobs.build_index` place it (`split_chain`,
`shared_chain`, `steps`), so what `t2rag plan` lists and checks against a cluster is what the run asks Ray for.
Two phases: `index` places its pools one after another (context summaries per corpus, then passage embedding),
`evaluate` places all of its pools at once (Ray Data streams through every operator together).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ray_jobs.placement import KINDS, Step, shared_chain, split_chain, steps, with_cpu_tokenizing
from t2rag.config import RunConfig
from t2rag.methods import ANSWER_TAIL, get_method
from t2rag.pipeline.plan import WorkGroup

#: CPU stages of Ray Data's vLLM processor around the engine (chat template, tokenize, detokenize): each an actor
#: pool of at least one actor holding one CPU.
VLLM_CPU_STAGES = 3


@dataclass(frozen=True)
class PoolSpec:
    """One actor pool (or vLLM engine pool) of a run."""

    phase: str  # "index": placed alone, one pool after another; "evaluate": every pool at once
    role: str  # the work it does: queries, passages, rerank, retrieve, answers, hyde, summaries, tokenize, light
    stages: tuple[str, ...]
    engine: str  # "vllm" or "actors"
    model: str | None  # what each actor or engine replica loads
    actors: int  # actors, or vLLM engine replicas
    cpus: float  # per actor or replica
    gpus: float  # per actor or replica (vLLM: tensor x pipeline parallel)
    tensor_parallel: int = 1  # GPUs of one replica that must share a node
    accelerator: str | None = None  # a Ray accelerator type every GPU of the pool must have
    side_cpus: float = 0.0  # CPUs of helper actors beside the pool (vLLM's CPU stages)
    placements: int = 1  # times the pool is placed (one after another), e.g. once per corpus

    @property
    def model_loads(self) -> int:
        return self.actors * self.placements if self.model else 0

    def to_dict(self) -> dict:
        return {**asdict(self), "model_loads": self.model_loads}


def run_pools(config: RunConfig, work: list[WorkGroup], corpora: int, passages: bool) -> list[PoolSpec]:
    """Every pool a Ray run of `work` places. `corpora`: how many corpora get context summaries (one placement
    each), `passages`: whether dense indexes are built."""
    out: list[PoolSpec] = []
    if corpora and any(get_method(m).index_texts == "summary" for m in config.methods):
        out += [_with(p, placements=corpora) for p in _pools(("generate",), config, "index", {"generate": "summaries"})]
    if passages:
        out += _pools(with_cpu_tokenizing(("embed_passages",), config), config, "index", {})
    retrieval_only, answering = [], []
    for group in work:
        own, rest, answers = split_chain(group.stages)
        out += _pools(with_cpu_tokenizing(own, config), config, "evaluate", {"generate": "hyde"})
        (answering if answers else retrieval_only).append(with_cpu_tokenizing(rest, config))
    for chains in (retrieval_only, answering):
        if not chains:
            continue
        merged = shared_chain(chains)
        for chain in [merged] if merged is not None else chains:
            out += _pools(chain, config, "evaluate", {})
    if answering:
        out += _pools(ANSWER_TAIL, config, "evaluate", {"generate": "answers"})
    return out


def _with(pool: PoolSpec, **fields) -> PoolSpec:
    return PoolSpec(**{**asdict(pool), **fields})


ROLES = {
    "embed_queries": "queries",
    "embed_passages": "passages",
    "tokenize_queries": "tokenize",
    "tokenize_passages": "tokenize",
    "rerank": "rerank",
    "retrieve": "retrieve",
    "generate": "answers",
}


def _pools(stages: tuple[str, ...], config: RunConfig, phase: str, roles: dict[str, str]) -> list[PoolSpec]:
    return [_pool(step, config, phase, roles) for step in steps(stages, config) if step.how != "tasks"]


def _pool(step: Step, config: RunConfig, phase: str, roles: dict[str, str]) -> PoolSpec:
    first = step.segment[0]
    role = roles.get(first) or ROLES.get(first, "light")
    if step.how == "vllm":
        g = config.generator
        assert g is not None
        per_replica = g.tensor_parallel_size * g.pipeline_parallel_size
        return PoolSpec(
            phase,
            role,
            step.segment,
            "vllm",
            g.model,
            actors=g.replicas,
            cpus=float(per_replica),  # one CPU per engine worker's bundle
            gpus=float(per_replica),
            tensor_parallel=g.tensor_parallel_size,
            accelerator=g.accelerator_type,
            side_cpus=float(VLLM_CPU_STAGES),
        )
    pool = step.pool
    assert pool is not None
    return PoolSpec(
        phase,
        role,
        step.segment,
        "actors",
        _model(KINDS.get(first), config),
        actors=pool.size * step.shards,
        cpus=pool.cpus,
        gpus=pool.gpus,
        tensor_parallel=max(1, math.ceil(pool.gpus)),
    )


def _model(kind: str | None, config: RunConfig) -> str | None:
    if kind == "embed":
        return config.retrieval.embedder.model
    if kind == "rerank":
        return config.retrieval.reranker.model
    if kind == "generate" and config.generator is not None:
        return config.generator.model
    return None
