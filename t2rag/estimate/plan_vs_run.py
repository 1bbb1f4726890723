"""Every run checked against its plan: what `t2rag plan` would say of the rows a run has left when it starts, kept
in the manifest and set beside what the run did when it ends (the result's `plan_vs_run`, which `t2rag report` and
the explorer show): the answers' prompt tokens, those computed and output tokens, and the seconds of each pool
with a model (the generator; the embedder for passages and for queries), at the rates the config points to.

The answers are compared, not HyDE's documents or the grades before them (the records keep the answer's tokens
only). The generator's seconds are its generating time (the records' `generation_s`, summed; load excluded); an
embedding pool's are its stage's total (`index`, where passages are embedded; `embed_queries`), with its load.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.estimate.pools import pool_times
from t2rag.estimate.rates import load_rates
from t2rag.estimate.workload import planned_workload
from t2rag.pools import PoolShape, PoolSpec
from t2rag.resources import Resources
from t2rag.stages.work import WorkGroup

FIELDS = ("answers", "prompt_tokens", "to_compute", "output_tokens", "generation_s", "passages_s", "queries_s")
#: The stage whose total time is an embedding pool's (its role in `t2rag plan`).
POOL_STAGES = {"passages_s": "index", "queries_s": "embed_queries"}


def plan_of_run(
    config: RunConfig, resources: Resources, work: list[WorkGroup], embedders: dict[str, PoolShape]
) -> dict | None:
    """The plan's figures for `work`: its answers and the seconds of its pools, the embedding pools shaped as
    `embedders` ({"passages" or "queries": shape}) says (None when the run neither answers nor embeds)."""
    rates = load_rates(config.estimate.rates)
    rate = rates.generators.get(config.generator.model) if config.generator else None
    workload = planned_workload(config, resources, work, rates)
    g = workload.total("answers")
    if not g.prompts and not workload.passages and not workload.query_embeddings():
        return None
    seconds: dict[str, float | None] = {"passages_s": None, "queries_s": None}
    embedding = {"passages_s": bool(workload.passages), "queries_s": bool(workload.query_embeddings())}
    for field, role in (("passages_s", "passages"), ("queries_s", "queries")):
        if role in embedders and embedding[field]:
            pool = PoolSpec("evaluate", role, (), config.retrieval.embedder.model, embedders[role])
            (time,) = pool_times(pool, workload, rates)  # no rate for the embedder: seconds None
            seconds[field] = None if time.seconds is None else round(time.seconds, 1)
    generating = rate.work_s(g.to_compute, g.positions(), g.output_tokens) if rate and g.prompts else None
    keys = [
        f"{m}\x1f{i}"
        for group in work
        if group.stages[-1] == "parse_answers"
        for m, i in zip(group.rows.column("method").to_pylist(), group.rows.column("id").to_pylist(), strict=True)
    ]
    return {
        "answers": g.prompts,
        "prompt_tokens": g.prompt_tokens,
        "to_compute": g.to_compute,
        "output_tokens": g.output_tokens,
        "generation_s": None if generating is None else round(generating, 1),
        **seconds,
        "rates": config.estimate.rates or "t2rag/reference/rates.yaml",
        "chars_per_token": workload.chars_per_token,
        "keys": keys,
    }


def against_run(plan: dict | None, records: pa.Table, stage_seconds: dict[str, float]) -> dict | None:
    """The plan's figures beside the run's own for the same answers and pools, and run / plan for each."""
    if not plan:
        return None
    keys = pc.binary_join_element_wise(records.column("method"), records.column("id"), "\x1f")
    mine = records.filter(pc.and_(pc.is_in(keys, pa.array(plan["keys"], pa.string())),
                                  pc.is_valid(records.column("prompt_tokens"))))  # fmt: skip

    def total(column: str) -> float:
        return float(pc.sum(mine.column(column).fill_null(0)).as_py() or 0)

    prompt = total("prompt_tokens")
    actual = {
        "answers": mine.num_rows,
        "prompt_tokens": int(prompt),
        "to_compute": int(prompt - total("cached_prompt_tokens")),
        "output_tokens": int(total("completion_tokens")),
        "generation_s": round(total("generation_s"), 1),
        **{f: round(stage_seconds[s], 1) if s in stage_seconds else None for f, s in POOL_STAGES.items()},
    }
    planned = {f: plan.get(f) for f in FIELDS}
    ratio = {f: round(actual[f] / planned[f], 3) if planned[f] and actual[f] is not None else None for f in FIELDS}
    return {"planned": planned, "actual": actual, "actual_over_planned": ratio, "rates": plan["rates"]}


LABELS = {
    "answers": "answers",
    "prompt_tokens": "prompt tokens",
    "to_compute": "prompt tokens computed",
    "output_tokens": "output tokens",
    "generation_s": "generator seconds",
    "passages_s": "embedding passages, seconds",
    "queries_s": "embedding queries, seconds",
}


def plan_table(checked: dict | None) -> tuple[list[str], list[list[object]]]:
    """A result's `plan_vs_run` as a table: each figure planned, done and their ratio (those the plan has)."""
    if not checked:
        return [], []
    header = ["answers' figure", "planned", "run", "run / planned"]
    rows = [
        [LABELS[f], checked["planned"].get(f), checked["actual"].get(f), checked["actual_over_planned"].get(f)]
        for f in FIELDS
        if checked["planned"].get(f) is not None
    ]
    return header, rows
