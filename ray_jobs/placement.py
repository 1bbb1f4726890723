"""Where the core stages run on a Ray cluster: actor pools (GPUs, sizes, batch sizes) and plain tasks.

Nothing here decides what a stage does. Consecutive stages of the same kind share one actor (one process holds
their models and indexes once); stages that hold nothing run as tasks; an embedding stage on GPUs gets its token ids
from a CPU pool in front of it; a retrieval over a sharded corpus is one pool per shard, in shard order; `generate`
with a vLLM generator is Ray Data's LLM processor instead of an actor pool. Every actor reports rows and busy
seconds per stage to the meter.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from ray_jobs.common import report, use_held_cpus
from t2rag.config import RunConfig
from t2rag.resources import Resources
from t2rag.stages import STAGES


@dataclass(frozen=True)
class Pool:
    """An actor pool: how many actors, what each holds, and how many rows a call gets."""

    size: int
    gpus: float
    cpus: float
    batch_size: int


def pool_for(kind: str, config: RunConfig) -> Pool:
    r = config.ray
    if kind == "embed":
        cpus = r.embed_cpus or (1.0 if r.embed_gpus else float(min(os.cpu_count() or 1, 8)))
        return Pool(r.embed_actors, r.embed_gpus, cpus, r.embed_batch_size)
    if kind == "tokenize":
        return Pool(r.tokenize_actors, 0.0, 1.0, r.embed_batch_size)
    if kind == "rerank":
        return Pool(r.rerank_actors, r.rerank_gpus, 1.0, r.rerank_batch_size)
    if kind == "generate":
        return Pool(r.generate_actors, 0.0, 1.0, r.generate_batch_size)
    return Pool(r.retrieve_actors, 0.0, 1.0, r.retrieve_batch_size)


#: The pool kind of each stage; stages not listed are light CPU work and share the retrieval pools' settings.
KINDS = {
    "tokenize_queries": "tokenize",
    "tokenize_passages": "tokenize",
    "embed_queries": "embed",
    "embed_passages": "embed",
    "retrieve": "retrieve",
    "rerank": "rerank",
    "generate": "generate",
}


#: The CPU stage that makes an embedding stage's token ids.
TOKENIZER_OF = {"embed_queries": "tokenize_queries", "embed_passages": "tokenize_passages"}


def with_cpu_tokenizing(stages: tuple[str, ...], config: RunConfig) -> tuple[str, ...]:
    """The stages with each embedding stage's tokenizing put in front of it, when tokenizing runs on CPU actors
    (by default when the embedding actors hold GPUs)."""
    on_cpu = config.ray.tokenize_on_cpu
    if not (config.ray.embed_gpus > 0 if on_cpu is None else on_cpu):
        return stages
    return tuple(name for stage in stages for name in (*_tokenizer_of(stage), stage))


def _tokenizer_of(stage: str) -> tuple[str, ...]:
    return (TOKENIZER_OF[stage],) if stage in TOKENIZER_OF else ()


def segments(stages: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Consecutive stages of one kind run in the same actor (or task)."""
    out: list[list[str]] = []
    for name in stages:
        if out and KINDS.get(name, "light") == KINDS.get(out[-1][-1], "light"):
            out[-1].append(name)
        else:
            out.append([name])
    return [tuple(s) for s in out]


class StageRunner:
    """Runs a fixed sequence of core stages on each batch; one Resources per process, built on the first call."""

    stages: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config_json: str):
        if any(STAGES[s].stateful for s in self.stages):  # a model-holding actor; light tasks need no torch
            use_held_cpus()
        resources = Resources(RunConfig.model_validate_json(config_json))
        self.steps = [(name, STAGES[name](resources)) for name in self.stages]

    def __call__(self, batch: pa.Table) -> pa.Table:
        for name, stage in self.steps:
            start = time.perf_counter()
            batch = stage(batch)
            report(name, batch.num_rows, time.perf_counter() - start)
        return batch


def runner_class(stages: tuple[str, ...]) -> type[StageRunner]:
    """A StageRunner subclass named after its stages (Ray titles each actor's process with it)."""
    name = "".join(STAGES[s].__name__ for s in stages)
    return type(name, (StageRunner,), {"stages": stages})


def place(ds, stages: tuple[str, ...], config: RunConfig):
    """`ds` through the stages, each segment as an actor pool, a task, or vLLM's processor."""
    import ray

    config_json = config.model_dump_json()
    for segment in segments(with_cpu_tokenizing(stages, config)):
        if segment == ("generate",) and config.generator is not None and config.generator.engine == "vllm":
            from t2rag.generation.vllm_ray import build_vllm_processor

            ds = build_vllm_processor(config.generator)(ds)
            continue
        runner = runner_class(segment)
        if not any(STAGES[s].stateful for s in segment):
            ds = ds.map_batches(lambda b, r=runner: r(config_json)(b), batch_format="pyarrow")
            continue
        pool = pool_for(KINDS.get(segment[0], "light"), config)
        for part in shard_configs(segment, config):
            # Ray Data restarts a dead pool actor and retries its batch (max_restarts=-1, max_task_retries=-1).
            ds = ds.map_batches(
                runner,
                fn_constructor_kwargs={"config_json": part.model_dump_json()},
                compute=ray.data.ActorPoolStrategy(size=pool.size),
                num_gpus=pool.gpus,
                num_cpus=pool.cpus,
                batch_size=pool.batch_size,
                batch_format="pyarrow",
            )
    return ds


def shard_configs(segment: tuple[str, ...], config: RunConfig) -> list[RunConfig]:
    """One config per pool for this segment: a retrieval over a sharded corpus gets a pool per shard, in shard
    order (each holds its shard only and merges into the running list of the shards before)."""
    r = config.retrieval
    if "retrieve" not in segment or r.shards == 1 or r.shard is not None:
        return [config]
    return [config.model_copy(update={"retrieval": r.model_copy(update={"shard": s})}) for s in range(r.shards)]
