"""Every run checked against its plan: what `t2rag plan` would say of the rows a run has left when it starts (its
answers' prompt tokens, those to compute, output tokens and the generator's seconds at the rates the config points
to), kept in the manifest, and set beside what the run's records say when it ends (the summary's `plan_vs_run`,
which `t2rag report` prints).

The answers are compared, not HyDE's documents or the grades before them (the records keep the answer's tokens
only); seconds are one replica's generating time (the records' `generation_s`, summed), load excluded.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.pipeline.plan import WorkGroup
from t2rag.rates import load_rates
from t2rag.resources import Resources
from t2rag.workload import measure_workload, planned_answer_tokens

FIELDS = ("answers", "prompt_tokens", "to_compute", "output_tokens", "generation_s")


def plan_of_run(config: RunConfig, resources: Resources, work: list[WorkGroup]) -> dict | None:
    """The plan's figures for the answers of `work` (None when the run answers nothing)."""
    if config.generator is None or not any(g.stages[-1] == "parse_answers" for g in work):
        return None
    rates = load_rates(config.estimate.rates)
    rate = rates.generators.get(config.generator.model)
    answer_tokens = planned_answer_tokens(config, rates)
    workload = measure_workload(config, resources, work, answer_tokens, rate.chars_per_token if rate else None)
    g = workload.total("answers")
    if not g.prompts:
        return None
    seconds = rate.work_s(g.to_compute, g.positions(), g.output_tokens) if rate else None
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
        "generation_s": None if seconds is None else round(seconds, 1),
        "rates": config.estimate.rates or "t2rag/reference/rates.yaml",
        "chars_per_token": rate.chars_per_token if rate and rate.chars_per_token else config.estimate.chars_per_token,
        "keys": keys,
    }


def against_run(plan: dict | None, records: pa.Table) -> dict | None:
    """The plan's figures beside the run's own for the same answers, and actual / planned for each."""
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
    }
    planned = {f: plan[f] for f in FIELDS}
    ratio = {f: round(actual[f] / planned[f], 3) if planned[f] else None for f in FIELDS}
    return {"planned": planned, "actual": actual, "actual_over_planned": ratio, "rates": plan["rates"]}


LABELS = {
    "answers": "answers",
    "prompt_tokens": "prompt tokens",
    "to_compute": "prompt tokens computed",
    "output_tokens": "output tokens",
    "generation_s": "generator seconds",
}


def plan_table(checked: dict | None) -> tuple[list[str], list[list[object]]]:
    """A summary's `plan_vs_run` as a table: each figure planned, done and their ratio."""
    if not checked:
        return [], []
    header = ["answers' figure", "planned", "run", "run / planned"]
    rows = [[LABELS[f], checked["planned"][f], checked["actual"][f], checked["actual_over_planned"][f]] for f in FIELDS]
    return header, rows
