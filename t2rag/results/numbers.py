"""The one place records become numbers: per (method, subset) totals summed from per-record values, the summaries
made of them (`t2rag.metrics.summary`), and the prompt tokens the generator computed and reused. A run's summary,
`t2rag score`, `t2rag report`, `t2rag compare`'s totals and the explorer all read these."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.metrics.retrieval import per_query
from t2rag.metrics.summary import DEFAULT_RETRIEVAL_METRICS, SubsetTotals, ordered_subsets, summary_from_totals

#: The record columns the metrics read.
METRIC_COLUMNS = ["method", "subset", "gold_rank", "number_match", "reference"]


def metric_values(table: pa.Table, retrieval_metrics: tuple[str, ...]) -> pa.Table:
    """Per-record values whose per-(method, subset) sums are the summary totals (see SubsetTotals).

    A record counts as generated when it has a Number Match verdict and as retrieved when it has a gold rank.
    """
    generated = pc.is_valid(table.column("number_match")).to_numpy(zero_copy_only=False)
    matched = generated & table.column("number_match").fill_null(False).to_numpy(zero_copy_only=False)
    non_numeric = generated & pc.is_null(table.column("reference")).to_numpy(zero_copy_only=False)
    retrieved = pc.is_valid(table.column("gold_rank")).to_numpy(zero_copy_only=False)
    ranks = table.column("gold_rank").fill_null(0).to_numpy(zero_copy_only=False)
    columns = {
        "method": table.column("method"),
        "subset": table.column("subset"),
        "generated": generated.astype(np.int64),
        "matched": matched.astype(np.int64),
        "non_numeric": non_numeric.astype(np.int64),
        "retrieved": retrieved.astype(np.int64),
    }
    for metric in retrieval_metrics:
        columns[metric] = np.where(retrieved, per_query(metric, ranks), 0.0)
    return pa.table(columns)


def summarize_records(
    records: pa.Table, retrieval_metrics: tuple[str, ...] = DEFAULT_RETRIEVAL_METRICS
) -> dict[str, dict]:
    """Per-method summaries from records: the one scoring route of runs, reports and `t2rag score`.

    Methods come in order of first appearance; nothing is parsed or ranked again.
    """
    if records.num_rows == 0:
        return {}
    values = metric_values(records, retrieval_metrics)
    sums = ["generated", "matched", "non_numeric", "retrieved", *retrieval_metrics]
    grouped = values.group_by(["method", "subset"]).aggregate([("method", "count"), *((c, "sum") for c in sums)])
    totals: dict[str, dict[str, SubsetTotals]] = {}
    for r in grouped.to_pylist():
        totals.setdefault(r["method"], {})[r["subset"]] = SubsetTotals(
            questions=int(r["method_count"]),
            generated=int(r["generated_sum"]),
            matched=int(r["matched_sum"]),
            non_numeric=int(r["non_numeric_sum"]),
            retrieved=int(r["retrieved_sum"]),
            metric_sums={m: float(r[f"{m}_sum"]) for m in retrieval_metrics},
        )
    order = list(dict.fromkeys(records.column("method").to_pylist()))
    return {m: summary_from_totals(totals[m], retrieval_metrics) for m in order}


#: The record columns `generation_usage` reads.
USAGE_COLUMNS = ["method", "subset", "number_match", "prompt_tokens", "cached_prompt_tokens"]


def generation_usage(records: pa.Table) -> dict[str, dict]:
    """Prompt tokens of the generated records (those with a Number Match verdict), per method: per subset and over
    all of them (`all`), in total, those the engine reused instead of computing (None where no record's engine
    says), and their share in percent of the prompt tokens of the records that say. Engine measurements, like
    timings: kept apart from the metrics, which every runner must agree on."""
    generated = records.filter(pc.is_valid(records.column("number_match")))
    if generated.num_rows == 0:
        return {}
    prompt = pc.cast(generated.column("prompt_tokens").fill_null(0), pa.int64())
    reported = pc.is_valid(generated.column("cached_prompt_tokens"))
    values = pa.table(
        {
            "method": generated.column("method"),
            "subset": generated.column("subset"),
            "prompt": prompt,
            "cached": pc.cast(generated.column("cached_prompt_tokens").fill_null(0), pa.int64()),
            "reported_prompt": pc.if_else(reported, prompt, 0),
            "reported": pc.cast(reported, pa.int64()),
        }
    )
    sums = ("prompt", "cached", "reported_prompt", "reported")
    grouped = values.group_by(["method", "subset"]).aggregate([(c, "sum") for c in sums])
    cells: dict[str, dict[str, tuple[int, ...]]] = {}
    for r in grouped.to_pylist():
        cells.setdefault(r["method"], {})[r["subset"]] = tuple(int(r[f"{c}_sum"]) for c in sums)
    out = {}
    for method in dict.fromkeys(generated.column("method").to_pylist()):
        subsets = cells[method]
        total = tuple(sum(v[i] for v in subsets.values()) for i in range(len(sums)))
        out[method] = {
            "subsets": {s: _usage(*subsets[s]) for s in ordered_subsets(list(subsets))},
            "all": _usage(*total),
        }
    return out


def _usage(prompt: int, cached: int, reported_prompt: int, reported: int) -> dict[str, int | float | None]:
    return {
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached if reported else None,
        "cached_share": round(100 * cached / reported_prompt, 2) if reported_prompt else None,
    }
