"""Where the core stages run on a Ray cluster: actor pools (GPUs, sizes, batch sizes) and plain tasks.

Nothing here decides what a stage does. Consecutive stages of the same kind share one actor (one process holds
their models and indexes once), and stages that load no model of their own run in the retrieval actors beside them
(`pool_kind`); stages that hold nothing run as tasks; an embedding stage on GPUs gets its token ids
from a CPU pool in front of it; a retrieval over a sharded corpus is one pool per shard, in shard order; `generate`
goes to the run's generator service (ray_jobs.generator_service: one set of model-holding replicas per run, whatever
phase generates). Every actor reports rows and busy seconds per stage to the meter.

Rows that reach their records by different chains (bm25: retrieve; base: embed_queries, retrieve; reranker: then
rerank) share the pools of the stages they have in common (`place_together`): one embedding pool (one model, one
GPU) per run instead of one per chain. Each row carries the stages it needs (`_stages`) and passes by the others,
and the columns it really has (`_columns`): Ray Data fills a column that only some rows of a batch have with nulls,
and a stage that reads a column when it is present (embed_queries' `query_text`) must not see such a column.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar, Literal

import pyarrow as pa

from ray_jobs.common import count_loads_on_meter, report, use_held_cpus
from ray_jobs.table_blocks import input_tasks
from t2rag.config import RunConfig
from t2rag.pools import PoolShape
from t2rag.resources import Resources
from t2rag.retrieval.dense.hashing_embedder import HASHING_MODEL
from t2rag.stages import STAGES, built
from t2rag.stages.base import groups, run_chain

#: Bookkeeping columns of rows placed together: the stages a row needs, and the columns it really has.
NEEDS, COLUMNS = "_stages", "_columns"


def order_of(name: str) -> int:
    """Where a stage runs in a row's chain (STAGES lists them in the order rows meet them, plugins' included)."""
    return list(STAGES).index(name)


def pool_for(kind: str, config: RunConfig) -> PoolShape:
    r = config.ray
    if kind == "embed":
        cpus = r.embed_cpus or (1.0 if r.embed_gpus else float(min(os.cpu_count() or 1, 8)))
        return PoolShape(r.embed_actors, cpus, r.embed_gpus, r.embed_batch_size)
    if kind == "tokenize":
        return PoolShape(r.tokenize_actors, 1.0, 0.0, r.embed_batch_size)
    if kind == "rerank":
        return PoolShape(r.rerank_actors, 1.0, r.rerank_gpus, r.rerank_batch_size)
    return PoolShape(r.retrieve_actors, 1.0, 0.0, r.retrieve_batch_size)


#: The pool kinds whose stages run torch models.
TORCH_KINDS = frozenset({"embed", "rerank"})
#: The pool kinds whose stages run the Rust tokenizers (the torch kinds tokenize unless a tokenizing pool did).
TOKENIZING_KINDS = TORCH_KINDS | {"tokenize"}

#: The CPU stage that makes an embedding stage's token ids.
TOKENIZER_OF = {"embed_queries": "tokenize_queries", "embed_passages": "tokenize_passages"}


def with_cpu_tokenizing(stages: tuple[str, ...], config: RunConfig) -> tuple[str, ...]:
    """The stages with each embedding stage's tokenizing put in front of it, when tokenizing runs on CPU actors
    (by default when the embedding actors hold GPUs). The hashing embedder has no tokenizer: nothing to put."""
    on_cpu = config.ray.tokenize_on_cpu
    if (
        not (config.ray.embed_gpus > 0 if on_cpu is None else on_cpu)
        or config.retrieval.embedder.model == HASHING_MODEL
    ):
        return stages
    return tuple(name for stage in stages for name in (*_tokenizer_of(stage), stage))


def _tokenizer_of(stage: str) -> tuple[str, ...]:
    return (TOKENIZER_OF[stage],) if stage in TOKENIZER_OF else ()


def pool_kind(name: str, config: RunConfig) -> str:
    """The kind of pool a stage runs in on Ray: its declared kind, except that a stage holding no model of its own
    (a `light` stage, or an embedding stage of the hashing embedder, which has no weights) runs in the CPU actors of
    the retrieval next to it: one process and one load of the corpus fewer per run. Not when the retrieval is
    sharded, where each retrieval actor holds one shard only."""
    kind = STAGES[name].pool  # as the stage declares it
    r = config.retrieval
    if r.holds_every_shard:
        return kind
    if kind == "light" or (kind == "embed" and r.embedder.model == HASHING_MODEL):
        return "retrieve"
    return kind


def segments(stages: tuple[str, ...], config: RunConfig) -> list[tuple[str, ...]]:
    """Consecutive stages of one actor kind (`pool_kind`) run in the same actor (or task)."""
    out: list[list[str]] = []
    for name in stages:
        if out and pool_kind(name, config) == pool_kind(out[-1][-1], config):
            out[-1].append(name)
        else:
            out.append([name])
    return [tuple(s) for s in out]


class StageActor:
    """Runs a fixed sequence of core stages on each batch; one Resources per process, built on the first call."""

    stages: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config_json: str):
        count_loads_on_meter()
        config = RunConfig.model_validate_json(config_json)
        kinds = {pool_kind(s, config) for s in self.stages}
        if kinds & TOKENIZING_KINDS:  # the others never import torch (2 s per process)
            use_held_cpus(torch_threads=bool(kinds & TORCH_KINDS))
        resources = Resources(config)
        self.steps = built(resources, self.stages)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.run(batch, self.stages)

    def run(self, batch: pa.Table, needed: tuple[str, ...] | set[str]) -> pa.Table:
        return run_chain([(name, stage) for name, stage in self.steps if name in needed], batch, report)


class SharedActor(StageActor):
    """A StageActor for rows of several chains: each part of a batch (rows needing the same stages and having the
    same columns) gets its real columns back and goes through the stages it needs."""

    def __call__(self, batch: pa.Table) -> pa.Table:
        parts = []
        for (needs, columns), rows in groups(batch, NEEDS, COLUMNS):
            part = batch.take(pa.array(rows)).select(columns.split(","))
            parts.append(with_column_names(self.run(part, set(needs.split(",")))))
        return pa.concat_tables(parts, promote_options="default") if parts else batch


def with_column_names(batch: pa.Table) -> pa.Table:
    """The batch with `_columns` naming its columns (itself included)."""
    names = [c for c in batch.column_names if c != COLUMNS] + [COLUMNS]
    return batch.select(names[:-1]).append_column(COLUMNS, pa.array([",".join(names)] * batch.num_rows, pa.string()))


def actor_class(stages: tuple[str, ...], base: type[StageActor] = StageActor) -> type[StageActor]:
    """A runner class named after its stages (Ray titles each actor's process with it)."""
    name = "".join(STAGES[s].__name__ for s in stages)
    return type(name, (base,), {"stages": stages})


def place(ds, stages: tuple[str, ...], config: RunConfig, service=None):
    """`ds` through the stages, each segment as an actor pool, a task, or the run's generator `service`."""
    return _place(ds, with_cpu_tokenizing(stages, config), config, StageActor, service)


def merged_chain(chains: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """Every stage of the chains, once, in the order rows meet them; None when a chain has a stage twice or out of
    that order (its rows cannot share a single pass over the stages)."""
    if any(list(c) != sorted(set(c), key=order_of) for c in chains):
        return None
    return tuple(sorted({s for c in chains for s in c}, key=order_of))


def shared_chain(chains: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The one chain the rows of `chains` pass through together, or None when they are placed apart: a chain with
    `generate` (the generator service takes only rows that generate), or chains that cannot share one pass over the
    stages."""
    merged = merged_chain(chains)
    return None if merged is None or "generate" in merged else merged


def place_together(parts: list[tuple[object, tuple[str, ...]]], config: RunConfig, service=None):
    """One dataset of the (dataset, stages) parts, each row through its own stages, every stage placed once where
    they can share (`shared_chain`), else each part apart."""
    chains = [with_cpu_tokenizing(stages, config) for _, stages in parts]
    merged = shared_chain(chains)
    if merged is None:
        return union([place(ds, stages, config, service) for ds, stages in parts])
    bound = input_tasks()
    tagged = [
        ds.map_batches(tagger(chain), batch_format="pyarrow", concurrency=bound)
        for (ds, _), chain in zip(parts, chains, strict=True)
    ]
    placed = _place(union(tagged), merged, config, SharedActor)
    return placed.map_batches(_untag, batch_format="pyarrow")


def tagger(chain: tuple[str, ...]):
    """A batch function that marks every row as needing the chain's stages and names the columns it has."""

    def tag(batch: pa.Table) -> pa.Table:
        return with_column_names(batch.append_column(NEEDS, pa.array([",".join(chain)] * batch.num_rows, pa.string())))

    return tag


def _untag(batch: pa.Table) -> pa.Table:
    return batch.drop_columns([c for c in (NEEDS, COLUMNS) if c in batch.column_names])


def union(datasets: list):
    """One dataset of all of them."""
    return datasets[0].union(*datasets[1:]) if len(datasets) > 1 else datasets[0]


@dataclass(frozen=True)
class Step:
    """How one segment of consecutive stages is placed: the run's generator service (`generate`), plain tasks
    (the stages hold nothing), or an actor pool per shard."""

    segment: tuple[str, ...]
    how: Literal["service", "tasks", "actors"]
    pool: PoolShape | None = None  # actors only
    shards: int = 1


def steps(stages: tuple[str, ...], config: RunConfig) -> list[Step]:
    """The placement of each segment of `stages` (already with their tokenizing stages, see `place`)."""
    out = []
    for segment in segments(stages, config):
        if segment == ("generate",):
            out.append(Step(segment, "service"))
        elif not any(STAGES[s].stateful for s in segment):
            out.append(Step(segment, "tasks"))
        else:
            pool = pool_for(pool_kind(segment[0], config), config)
            out.append(Step(segment, "actors", pool, len(shard_configs(segment, config))))
    return out


def _place(ds, stages: tuple[str, ...], config: RunConfig, base: type[StageActor], service=None):
    import ray

    config_json = config.model_dump_json()
    for step in steps(stages, config):
        if step.how == "service":
            from ray_jobs.generator_service import place_on_service

            if service is None:
                raise ValueError("a generate stage needs the run's generator service")
            ds = place_on_service(ds, service, config)
            continue
        runner = actor_class(step.segment, base)
        if step.how == "tasks":
            ds = ds.map_batches(lambda b, r=runner: r(config_json)(b), batch_format="pyarrow")
            continue
        pool = step.pool
        for part in shard_configs(step.segment, config):
            # Ray Data restarts a dead pool actor and retries its batch (max_restarts=-1, max_task_retries=-1).
            ds = ds.map_batches(
                runner,
                fn_constructor_kwargs={"config_json": part.model_dump_json()},
                compute=ray.data.ActorPoolStrategy(size=pool.actors),
                num_gpus=pool.gpus,
                num_cpus=pool.cpus,
                batch_size=pool.batch_rows,
                batch_format="pyarrow",
            )
    return ds


def shard_configs(segment: tuple[str, ...], config: RunConfig) -> list[RunConfig]:
    """One config per pool for this segment: a retrieval over a sharded corpus gets a pool per shard, in shard
    order (each holds its shard only and merges into the running list of the shards before)."""
    r = config.retrieval
    if "retrieve" not in segment or not r.holds_every_shard:
        return [config]
    return [config.model_copy(update={"retrieval": r.model_copy(update={"shard": s})}) for s in range(r.shards)]
