"""A run's plan before any GPU-second is spent: its work, its pools on Ray, whether they fit a cluster, and what it
will take. `t2rag plan` prints it; `t2rag eval --runner ray` and `ray_jobs.evaluate` check the fit against the
cluster they run on before loading any model or building any index.

Nothing here loads a model: the work comes from the core plan and the data (`t2rag.estimate.workload`), the pools
from the functions that place them (`ray_jobs.pools`), the cluster from Ray (`capacity.live_nodes`) or a launcher file
(`cluster_file.nodes_of`), and the estimate from throughputs with named sources (`t2rag.estimate.rates`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ray_jobs.capacity import Fit, Node, describe, fit, live_nodes, totals
from ray_jobs.pools import run_pools
from t2rag.config import RunConfig
from t2rag.errors import T2RagError
from t2rag.estimate.judging import JudgePlan, plan_judge
from t2rag.estimate.pools import PoolTime, pool_times, rate_of
from t2rag.estimate.rates import Rates, load_rates
from t2rag.estimate.workload import Workload, planned_workload
from t2rag.methods import get_method
from t2rag.pipeline.model_check import ModelNeed, needed_models
from t2rag.pools import PoolSpec
from t2rag.resources import Resources
from t2rag.results.tables import markdown_table
from t2rag.stages.work import WorkGroup, work_left

#: The launcher writes the cluster file here on the head; a driver there (`ray job submit`) plans against the
#: largest cluster the autoscaler may start, not only the nodes up now.
BOOTSTRAP_FILE = Path("~/ray_bootstrap_config.yaml").expanduser()


class PlacementError(T2RagError):
    """The run's pools cannot be placed on the cluster."""


@dataclass(frozen=True)
class Target:
    """The cluster a plan is checked against."""

    description: str
    nodes: list[Node]


@dataclass
class Estimate:
    pools: list[PoolTime]
    phases: dict[str, float | None]  # seconds of wall time per phase
    gpu_hours: float | None
    price_per_gpu_hour: float | None
    sources: dict[str, str] = field(default_factory=dict)  # model -> where its figures come from

    @property
    def wall_s(self) -> float | None:
        values = list(self.phases.values())
        return None if any(v is None for v in values) else sum(values)

    @property
    def cost(self) -> float | None:
        if self.gpu_hours is None or self.price_per_gpu_hour is None:
            return None
        return self.gpu_hours * self.price_per_gpu_hour


@dataclass
class RunPlan:
    config: RunConfig
    data: dict
    workload: Workload
    pools: list[PoolSpec]
    target: Target
    fits: dict[str, Fit]  # phase (or "index: <pool>") -> outcome
    estimate: Estimate
    models: list[ModelNeed] = field(default_factory=list)  # what the run loads, checked on this machine
    judge: JudgePlan | None = None  # what the run's judge: block asks once the run has answered

    @property
    def refusal(self) -> str | None:
        return next((f.message() for f in self.fits.values() if not f.fits), None)

    def model_loads(self) -> dict[str, int]:
        loads: dict[str, int] = {}
        for pool in self.pools:
            if pool.model:
                loads[pool.model] = loads.get(pool.model, 0) + pool.model_loads
        return loads

    def to_dict(self) -> dict:
        return {
            "config": self.config.name,
            "data": self.data,
            "workload": self.workload.to_dict(),
            "pools": [p.to_dict() for p in self.pools],
            "model_loads": self.model_loads(),
            "models": [m.to_dict() for m in self.models],
            "judge": None if self.judge is None else self.judge.to_dict(),
            "target": {"description": self.target.description, "nodes": [asdict(n) for n in self.target.nodes]},
            "fits": self.refusal is None,
            "refusal": self.refusal,
            "estimate": {
                "pools": [
                    {
                        "stages": list(t.pool.stages),
                        "role": t.pool.role,
                        "phase": t.pool.phase,
                        "seconds": t.seconds,
                        "note": t.note,
                    }
                    for t in self.estimate.pools
                ],
                "phases_s": self.estimate.phases,
                "wall_s": self.estimate.wall_s,
                "gpu_hours": self.estimate.gpu_hours,
                "price_per_gpu_hour": self.estimate.price_per_gpu_hour,
                "cost": self.estimate.cost,
                "sources": self.estimate.sources,
            },
        }


def local_target(config: RunConfig) -> Target:
    """The local cluster `t2rag eval --runner ray` would start on this machine."""
    from ray_jobs.local_cluster import local_cpus

    cpus = float(config.ray.num_cpus or local_cpus())
    gpus = float(config.ray.num_gpus or 0)
    return Target(f"a local cluster on this machine ({cpus:g} CPUs, {gpus:g} GPUs)", [Node("local", cpus, gpus)])


def cluster_file_target(path: str, max_workers: int | None = None) -> Target:
    """The largest cluster a Ray cluster launcher file or a KubeRay manifest (RayJob, RayCluster, RayService)
    can scale to."""
    from ray_jobs.cluster_file import load_cluster_file, nodes_of
    from ray_jobs.kuberay import is_manifest, load_manifest, nodes_of_manifest

    if is_manifest(path):
        nodes = nodes_of_manifest(load_manifest(path), max_workers)
    else:
        nodes = nodes_of(load_cluster_file(path), max_workers)
    workers = len(nodes) - 1
    return Target(f"{path} at its largest ({workers} worker node(s); {_sizes(nodes)})", nodes)


def live_target(address: str | None = None) -> Target:
    """The cluster at `address` (or the one this process is connected to)."""
    import ray

    connected = ray.is_initialized()
    if not connected:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR")
    try:
        nodes = live_nodes()
    finally:
        if not connected:
            ray.shutdown()
    return Target(f"the cluster at {address or 'this process'} ({len(nodes)} node(s) up; {_sizes(nodes)})", nodes)


def _sizes(nodes: list[Node]) -> str:
    t = totals(nodes)
    return f"{t['CPU']:g} CPUs and {t['GPU']:g} GPUs in all"


def make_plan(config: RunConfig, target: Target, resources: Resources | None = None, done=None) -> RunPlan:
    """The plan of `config` on `target`: the work left (after `done`), pools, fit and estimate."""
    resources = resources or Resources(config)
    rates = load_rates(config.estimate.rates)
    work = work_left(config, resources.questions, done)
    workload = planned_workload(config, resources, work, rates)
    pools = pools_of(config, resources, work)
    return RunPlan(
        config,
        resources.data_description(),
        workload,
        pools,
        target,
        check_fit(pools, target.nodes),
        estimate(config, pools, workload, rates),
        needed_models(config, work),
        plan_judge(config, resources.questions, rates),
    )


def pools_of(config: RunConfig, resources: Resources, work: list[WorkGroup]) -> list[PoolSpec]:
    corpora = 1 if config.data.pooled_corpus else len(resources.questions.subsets)
    dense = any(get_method(m).searches_vectors for m in config.methods)
    return run_pools(config, work, corpora, dense)


def check_fit(pools: list[PoolSpec], nodes: list[Node]) -> dict[str, Fit]:
    """Each index pool with the run's generator service (index pools are placed one after another), and every
    evaluation pool at once with it."""
    held = [p for p in pools if p.phase == "run"]
    out = {f"index: {describe(p)}": fit([*held, p], nodes) for p in pools if p.phase == "index"}
    evaluate = [p for p in pools if p.phase == "evaluate"]
    if evaluate or held:
        out["evaluate"] = fit([*held, *evaluate], nodes)
    return out


def require_fit(config: RunConfig, resources: Resources) -> None:
    """Refuse, before any model is loaded, a Ray run whose pools cannot be placed on the connected cluster (or,
    on a launcher-started head, on the largest cluster its autoscaler may start)."""
    if not config.ray.check_placement:
        return
    bootstrap = os.environ.get("T2RAG_CLUSTER_FILE") or (str(BOOTSTRAP_FILE) if BOOTSTRAP_FILE.exists() else None)
    nodes = cluster_file_target(bootstrap).nodes if bootstrap else live_nodes()
    pools = pools_of(config, resources, work_left(config, resources.questions))
    for outcome in check_fit(pools, nodes).values():
        if not outcome.fits:
            raise PlacementError(outcome.message())


def estimate(config: RunConfig, pools: list[PoolSpec], workload: Workload, rates: Rates) -> Estimate:
    """Seconds of work per pool from its work and rates. The index phase runs the summaries on the generator
    service, then its pools one after another; the evaluation runs its pools and the service's HyDE documents and
    answers at once (its slowest one sets the time). GPU-hours: GPUs held for those times, the service's for the
    whole run."""
    times = [t for p in pools for t in pool_times(p, workload, rates)]
    service = [t for t in times if t.pool.phase == "run"]
    index = [t for t in times if t.pool.phase == "index"] + [t for t in service if t.note.startswith("summaries")]
    evaluate = [t for t in times if t.pool.phase == "evaluate"] + [t for t in service if t not in index]
    phases: dict[str, float | None] = {}
    if index:
        phases["index"] = None if any(t.seconds is None for t in index) else sum(t.seconds for t in index)
    if evaluate:
        phases["evaluate"] = None if any(t.seconds is None for t in evaluate) else max(t.seconds for t in evaluate)
    gpu_hours = None
    if all(v is not None for v in phases.values()):
        wall = sum(phases.values())
        held = sum(p.shape.actors * p.shape.gpus for p in pools if p.phase == "run") * wall
        indexing = sum(t.seconds * t.pool.shape.actors * t.pool.shape.gpus for t in index if t.pool.phase == "index")
        streaming = phases.get("evaluate", 0.0) * sum(
            p.shape.actors * p.shape.gpus for p in pools if p.phase == "evaluate"
        )
        gpu_hours = (held + indexing + streaming) / 3600
    sources = {p.model: rate.source for p in pools if (rate := rate_of(p, rates)) is not None}
    return Estimate(times, phases, gpu_hours, config.estimate.price_per_gpu_hour, sources)


def render(plan: RunPlan) -> str:
    """The plan as text: work, pools, model loads, fit and estimate."""
    w = plan.workload
    lines = [f"Plan of '{plan.config.name}' as a Ray run (nothing is loaded or run)", "", "Data:"]
    for name, d in plan.data["subsets"].items():
        lines.append(
            f"- {name}: {', '.join(d['splits']) or '?'}; {d['questions']:,} questions, {d['contexts']:,} contexts"
        )
    rows = [
        [m.method, m.subset, m.retrievals, m.dense_queries, m.reranked_pairs, g.prompts, g.prompt_tokens,
         g.to_compute, g.output_tokens]
        for m in w.methods
        for g in [m.pre_answer + m.answers]
    ]  # fmt: skip
    for corpus, g in w.summaries.items():
        rows.append(["(context summaries)", corpus, 0, 0, 0, g.prompts, g.prompt_tokens, g.to_compute, g.output_tokens])
    header = ["method", "subset", "ranked", "embedded", "reranked pairs", "prompts", "prompt tokens",
              "to compute", "output tokens"]  # fmt: skip
    lines += ["", f"Work (tokens estimated at {w.chars_per_token:g} characters per token):", "",
              markdown_table(header, rows)]  # fmt: skip
    if w.passages:
        lines.append("Passages to embed (skipped where an index already holds them): "
                     + ", ".join(f"{k} {n:,}" for k, n in w.passages.items()))  # fmt: skip
    pool_rows = [
        [p.phase, p.role, "+".join(p.stages), p.engine or "-", p.model or "-", p.shape.actors, p.shape.cpus,
         p.shape.gpus, p.shape.gpus_together if p.engine and p.shape.gpus else "-", p.model_loads]
        for p in plan.pools
    ]  # fmt: skip
    lines += ["", "Pools (the generator is held for the run; index pools run one after another, evaluation pools"
              " all at once):", "",
              markdown_table(["phase", "role", "stages", "engine", "model", "actors", "CPU each", "GPU each",
                              "TP", "model loads"], pool_rows)]  # fmt: skip
    lines += ["", "Model loads: " + (", ".join(f"{m} x{n}" for m, n in plan.model_loads().items()) or "none")]
    if plan.models:
        lines += ["", "Models, and whether this machine can have them (a run checks again where it starts):"]
        lines += [f"- {m.role} {m.model} (for {', '.join(m.methods)}): {'yes' if m.available else 'NO'}, {m.where}"
                  for m in plan.models]  # fmt: skip
    lines += ["", f"Target: {plan.target.description}"]
    refusal = plan.refusal
    lines.append(f"Fits: {'yes' if refusal is None else 'NO: ' + refusal}")
    e = plan.estimate
    answers = w.total("pre_answer") + w.total("answers") + w.total("summaries")
    reuse = plan.config.generator is not None and plan.config.generator.prefix_reuse
    basis = ("prompts that share a prefix run together (generator.prefix_reuse): the system prompt once per"
             " replica, each leading context once per gold context" if reuse else
             "generator.prefix_reuse is off: every prompt token computed")  # fmt: skip
    lines += ["", f"Prompt tokens: {answers.prompt_tokens:,} in total, {answers.to_compute:,} to compute ({basis}).",
              "", "Estimate (prefill from the tokens to compute):"]  # fmt: skip
    for t in e.pools:
        if t.pool.model or t.pool.plugins:
            took = "unknown" if t.seconds is None else _duration(t.seconds)
            lines.append(f"- {t.pool.role} ({t.pool.model or 'plugin'}, {t.pool.shape.actors} x): {took}; {t.note}")
    for phase, seconds in e.phases.items():
        lines.append(f"- {phase} phase: {'unknown' if seconds is None else _duration(seconds)}")
    if e.wall_s is not None:
        cost = f", {e.cost:,.0f} at {e.price_per_gpu_hour:g} per GPU-hour" if e.cost is not None else ""
        lines.append(f"- wall time {_duration(e.wall_s)}, {e.gpu_hours:,.1f} GPU-hours held by the pools{cost}")
    if plan.judge is not None:
        j = plan.judge
        took = "unknown" if j.seconds is None else _duration(j.seconds)
        lines += ["", f"Judge (t2rag judge, after the run): {j.judge} ({j.model}) against {j.baseline}: "
                  + ", ".join(f"{m} {n:,} pairs" for m, n in j.pairs.items())
                  + f"; {j.prompts:,} prompts, {j.prompt_tokens:,} prompt tokens + {j.output_tokens:,} output tokens "
                  f"at most; {took} ({j.note})"]  # fmt: skip
    lines += ["", "Rates assumed (estimate.rates overrides them):"]
    lines += [f"- {model}: {source}" for model, source in e.sources.items()]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
