"""A pool's seconds of work: the one place the estimate turns a pool's shape, its model's rate and the workload into
time. `t2rag plan` sums them into phases (`ray_jobs.preflight`); every run keeps the embedding pools' beside what they
took (`t2rag.estimate.plan_vs_run`)."""

from __future__ import annotations

from dataclasses import dataclass

from t2rag.estimate.rates import EmbedderRate, GeneratorRate, Rates, RerankerRate
from t2rag.estimate.workload import Workload
from t2rag.methods import get_method
from t2rag.pools import PoolSpec
from t2rag.retrieval import RETRIEVERS


@dataclass
class PoolTime:
    """A pool's seconds of one piece of work, and what the work is."""

    pool: PoolSpec
    seconds: float | None  # None: no rate known for its model
    note: str


def rate_of(pool: PoolSpec, rates: Rates) -> GeneratorRate | EmbedderRate | RerankerRate | None:
    """The rate of the model a pool loads, by its role (None: it loads none, or no rate is known)."""
    if pool.model is None:
        return None
    if pool.role == "generator":
        return rates.generators.get(pool.model)
    if pool.role in ("queries", "passages"):
        return rates.embedders.get(pool.model)
    if pool.role == "rerank":
        return rates.rerankers.get(pool.model)
    return None


def plugin_rows(workload: Workload, name: str) -> int:
    """The rows a plugin's stage or retriever handles: the questions ranked by the methods that run it."""

    def runs(method: str) -> bool:
        m = get_method(method)
        fused = RETRIEVERS[m.retriever].members if m.retriever in RETRIEVERS else ()
        return name in m.stages or name == m.retriever or name in fused

    return sum(w.retrievals for w in workload.methods if runs(w.method))


def plugin_time(pool: PoolSpec, workload: Workload, rates: Rates) -> PoolTime:
    """A pool running plugin code: its plugins' rows at their rates (a rates file's `plugins:`, which `t2rag rates
    measure` writes), one after another on the pool's actors; unknown while any of them has no rate."""
    missing = [p for p in pool.plugins if p not in rates.plugins]
    if missing:
        return PoolTime(pool, None, f"no rate is known for plugin code ({', '.join(missing)}): measure it with "
                        "`t2rag rates measure` (estimate.rates)")  # fmt: skip
    rows = {p: plugin_rows(workload, p) for p in pool.plugins}
    seconds = sum(rates.plugins[p].seconds(n, pool.shape.actors) for p, n in rows.items())
    return PoolTime(pool, seconds, ", ".join(f"{p}: {n:,} rows" for p, n in rows.items()))


def pool_times(pool: PoolSpec, workload: Workload, rates: Rates) -> list[PoolTime]:
    """Its seconds of work; the generator service's split into summaries and the evaluation's generation (HyDE
    and answers), with its one model load in the first."""
    if pool.plugins:
        return [plugin_time(pool, workload, rates)]
    if pool.model is None:
        return [PoolTime(pool, 0.0, "CPU work, not estimated (seconds at these sizes)")]
    rate = rate_of(pool, rates)
    if rate is None:
        return [PoolTime(pool, None, f"no rate for {pool.model}: add it to a rates file (estimate.rates)")]
    if pool.role == "generator":
        scale = pool.shape.actors * (
            pool.shape.gpus if rate.device == "gpu" else 1.0
        )  # GPU rates are per GPU of a replica
        out, load = [], rate.load_s
        before = workload.total("pre_answer")
        label = "HyDE documents, grades and answers" if before.prompts else "answers"
        evaluated = (label, before + workload.total("answers"))
        for label, g in (("summaries", workload.total("summaries")), evaluated):
            if g.prompts:
                seconds = rate.work_s(g.to_compute, g.positions(), g.output_tokens)
                note = (f"{label}: {g.prompts:,} prompts, {g.prompt_tokens:,} prompt tokens ({g.to_compute:,} to "
                        f"compute) + {g.output_tokens:,} output tokens")  # fmt: skip
                out.append(PoolTime(pool, seconds / scale + load, note))
                load = 0.0
        return out
    per_actor = pool.shape.gpus if pool.shape.gpus else pool.shape.cpus
    if pool.role == "rerank":
        pairs = sum(m.reranked_pairs for m in workload.methods)
        speed = (rate.gpu_pairs_per_s if pool.shape.gpus else rate.cpu_pairs_per_s) * per_actor * pool.shape.actors
        return [PoolTime(pool, pairs / speed + rate.load_s, f"{pairs:,} pairs")]
    if pool.role == "passages":
        tokens = workload.embedded_passage_tokens(rate.window)
        note = f"{sum(workload.passages.values()):,} passages"
    else:
        tokens = workload.embedded_query_tokens(rate.window)
        note = f"{workload.query_embeddings():,} questions"
    return [PoolTime(pool, rate.seconds(tokens, pool.shape.actors, pool.shape.cpus, pool.shape.gpus), note)]
