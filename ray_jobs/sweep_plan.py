"""`t2rag plan SWEEP.yaml`: a sweep priced before it runs.

Each trial is planned as its own run (`make_plan` on the target); the sweep adds them up: the trials, the model
loads (a model two trials share is loaded once per sweep: vector tables are shared, trial actors reused), tokens,
GPU-hours and cost, and the wall time of the trials on `max_concurrent` slots (longest first, each to the slot that
frees first). A trial whose pools cannot be placed refuses the whole sweep, in one line, before anything loads.
"""

from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, field

from ray_jobs.preflight import RunPlan, Target, make_plan
from t2rag.sweep.spec import Sweep, Trial


@dataclass
class SweepPlan:
    name: str
    target: str
    max_concurrent: int
    trials: list[dict]
    searched: int  # trials a search will sample (each planned as its base)
    model_loads: dict[str, int]  # once per sweep
    model_loads_unshared: dict[str, int]  # what separate runs would load
    prompt_tokens: float
    output_tokens: float
    trial_seconds: float | None
    wall_s: float | None
    gpu_hours: float | None
    cost: float | None
    refusal: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def plan_sweep(sweep: Sweep, target: Target) -> SweepPlan:
    trials: list[Trial] = sweep.trials or [sweep.trial({})]
    copies = sweep.spec.search.trials if sweep.spec.search else 1
    plans = [(t, make_plan(t.config, target)) for t in trials]
    rows, loads, unshared = [], {}, {}
    refusal = None
    embedded: set[str] = set()
    for trial, plan in plans:
        key = passages_key(trial.config)
        embeds = any(plan.workload.passages.values())
        rows.append(trial_row(trial, plan, shares_passages=embeds and key in embedded))
        if embeds:
            embedded.add(key)
        for model, n in plan.model_loads().items():
            loads[model] = max(loads.get(model, 0), n)
            unshared[model] = unshared.get(model, 0) + n * copies
        if plan.refusal and refusal is None:
            refusal = f"trial {trial.name}: {plan.refusal}"
    seconds = [r["wall_s"] for r in rows] * copies
    known = None if any(s is None for s in seconds) else seconds
    gpu = [r["gpu_hours"] for r in rows] * copies
    cost = [r["cost"] for r in rows] * copies
    return SweepPlan(
        name=sweep.spec.name,
        target=target.description,
        max_concurrent=sweep.spec.max_concurrent,
        trials=rows,
        searched=copies if sweep.spec.search else 0,
        model_loads=loads,
        model_loads_unshared=unshared,
        prompt_tokens=sum(r["prompt_tokens"] for r in rows) * copies,
        output_tokens=sum(r["output_tokens"] for r in rows) * copies,
        trial_seconds=None if known is None else sum(known),
        wall_s=None if known is None else slots_wall(known, sweep.spec.max_concurrent),
        gpu_hours=None if any(g is None for g in gpu) else sum(gpu),
        cost=None if any(c is None for c in cost) else sum(cost),
        refusal=refusal,
    )


def passages_key(config) -> str:
    """What makes two trials' embedded passages one vector table: the corpus and how it is embedded."""
    import json

    retrieval = config.retrieval
    return json.dumps([config.data.model_dump(), retrieval.embedder.model_dump(), retrieval.chunking.model_dump()],
                      sort_keys=True, default=str)  # fmt: skip


def trial_row(trial: Trial, plan: RunPlan, shares_passages: bool = False) -> dict:
    """One trial's plan; a trial whose passages an earlier trial embeds reads its vector table instead (its index
    phase costs nothing)."""
    answers = plan.workload.total("answers")
    pre = plan.workload.total("pre_answer")
    summaries = plan.workload.total("summaries")
    wall = plan.estimate.wall_s
    if wall is not None and shares_passages:
        wall -= plan.estimate.phases.get("index") or 0.0
    return {
        "trial": trial.name,
        "values": trial.values,
        "model_loads": plan.model_loads(),
        "prompt_tokens": answers.prompt_tokens + pre.prompt_tokens + summaries.prompt_tokens,
        "output_tokens": answers.output_tokens + pre.output_tokens + summaries.output_tokens,
        "wall_s": wall,
        "shares_passages": shares_passages,
        "gpu_hours": plan.estimate.gpu_hours,
        "cost": plan.estimate.cost,
        "refusal": plan.refusal,
    }


def slots_wall(seconds: list[float], slots: int) -> float:
    """The time `seconds` of work take on `slots` parallel slots, longest first to the slot that frees first."""
    free = [0.0] * max(1, slots)
    for s in sorted(seconds, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + s)
    return max(free)


def render_sweep_plan(plan: SweepPlan) -> str:
    from t2rag.progress import format_seconds

    lines = [f"Plan of sweep '{plan.name}' on {plan.target} (nothing is loaded or run)", ""]
    n = len(plan.trials) if not plan.searched else plan.searched
    lines.append(f"Trials: {n}" + (" (a search: each planned as its base config)" if plan.searched else ""))
    for r in plan.trials:
        t = "unknown" if r["wall_s"] is None else format_seconds(r["wall_s"])
        shared = " (its passages embedded by an earlier trial)" if r["shares_passages"] else ""
        lines.append(f"- {r['trial']}: {t}, {r['prompt_tokens']:,.0f} prompt tokens{shared}" + (
            f"  REFUSED: {r['refusal']}" if r["refusal"] else ""))  # fmt: skip
    shared = ", ".join(f"{m} x{n}" for m, n in plan.model_loads.items()) or "none"
    alone = sum(plan.model_loads_unshared.values())
    lines += ["", f"Model loads: {shared} (shared by the trials; {alone} as separate runs)"]
    lines.append(f"Tokens: {plan.prompt_tokens:,.0f} prompt, {plan.output_tokens:,.0f} output")
    if plan.wall_s is None:
        lines.append("Wall time: unknown (a trial's pool has no rate: t2rag rates measure)")
    else:
        lines.append(f"Wall time: {format_seconds(plan.wall_s)} at max_concurrent {plan.max_concurrent} "
                     f"({format_seconds(plan.trial_seconds or 0)} of trials in all)")  # fmt: skip
    if plan.gpu_hours is not None:
        lines.append(f"GPU-hours: {plan.gpu_hours:.2f}" + (f", cost {plan.cost:.2f}" if plan.cost is not None else ""))
    return "\n".join(lines)
