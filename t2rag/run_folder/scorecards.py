"""The one place records become numbers: per (method, subset) totals summed from per-record values, each method's
scorecard made of them (its metrics per subset, and the weighted average over subsets: the paper's "W. Avg Total"),
and the prompt tokens the generator computed and reused. A run's result, `t2rag score`, `t2rag report`,
`t2rag compare` and the explorer all read these.

All values are percentages. Every scorecard is built from per-subset totals (counts and sums of per-question values),
so the single-process scorer and the distributed reduce share one formula. The weighted average weights each subset
by the number of questions its metric was computed on, which equals the mean over all questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.data.schema import SUBSETS
from t2rag.metrics.answers import ANSWER_SCORE_TYPES
from t2rag.metrics.retrieval import per_query

#: The routing columns the scorecards read (t2rag.stages.route adds them).
ROUTING_TYPES: dict[str, pa.DataType] = {"routing_acc": pa.bool_(), "routing_ndcg3": pa.float64()}

DEFAULT_RETRIEVAL_METRICS: tuple[str, ...] = ("mrr@3", "mrr@5", "recall@1", "recall@3", "recall@5", "ndcg@3")


def ordered_subsets(names: Sequence[str] | np.ndarray) -> list[str]:
    present = {str(n) for n in names}
    return [s for s in SUBSETS if s in present] + sorted(present - set(SUBSETS))


def _pct(numerator: float, denominator: int) -> float:
    return round(100.0 * numerator / denominator, 4) if denominator else float("nan")


#: The interval reported beside every Number Match: 95% Wilson score interval, in percent.
NM_INTERVAL = "number_match_ci95"
#: The rates with a Wilson interval beside them (`<rate>_ci95`), and the count each is a share of: the answers'
#: and the router's.
ANSWER_RATES: dict[str, str] = {"number_match": "generated", "exe_acc": "exe_scored", "em": "em_scored",
                                "program_acc": "program_scored"}  # fmt: skip
RATES: dict[str, str] = {**ANSWER_RATES, "routing_acc": "routed"}
#: The rates beside Number Match (each a record column of its own: t2rag.metrics.answers, t2rag.stages.route).
FAMILY_RATES: tuple[str, ...] = tuple(rate for rate in RATES if rate != "number_match")
#: The EM misses a change of scale or sign would mend (t2rag.metrics.tatqa), counted per subset.
ERROR_COUNTS: dict[str, str] = {"scale": "scale_errors", "sign": "sign_errors", "scale_sign": "scale_sign_errors"}
#: Counts that add up over subsets rather than average; `percent_undecided` counts the EM-scored answers whose
#: question the percent rule could not read (t2rag.metrics.percent_rule), shown only where there are any.
SUMMED = ("non_numeric_references", *ERROR_COUNTS.values(), "percent_undecided")
#: The count each averaged metric is weighted by over subsets (retrieval metrics: `retrieved`); `em_if_percent` is
#: EM with the undecided golds read in percent points.
WEIGHTS: dict[str, str] = {**RATES, "f1": "em_scored", "em_if_percent": "em_scored", "routing_ndcg3": "routed"}


def interval_key(rate: str) -> str:
    """The name of a rate's 95% interval in a scorecard."""
    return f"{rate}_ci95"


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> list[float]:
    """The Wilson score interval of a proportion, in percent ([nan, nan] without trials). Unlike the normal
    approximation it stays inside [0, 100] and is not empty at 0 or n successes, which small generation
    samples hit often."""
    if trials <= 0:
        return [float("nan"), float("nan")]
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return [round(100 * max(0.0, centre - half), 2), round(100 * min(1.0, centre + half), 2)]


@dataclass
class SubsetTotals:
    """Counts and sums for one subset; `generated`/`retrieved` are None when that metric group is absent."""

    questions: int
    generated: int | None = None
    matched: int = 0
    non_numeric: int = 0
    retrieved: int | None = None
    metric_sums: dict[str, float] = field(default_factory=dict)
    #: Per rate of FAMILY_RATES, the records it scored (generated answers with that verdict; routed questions) and
    #: those it counts right. Records written before a yardstick existed have no verdict and count in neither.
    trials: dict[str, int] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    f1_sum: float = 0.0  # over the EM-scored answers
    routing_ndcg_sum: float = 0.0  # over the routed questions
    errors: dict[str, int] = field(default_factory=dict)  # EM misses per kind of ERROR_COUNTS
    percent_undecided: int = 0  # EM-scored answers whose gold's percent reading is undecided
    em_if_percent_hits: int = 0  # EM hits with those golds read in percent points

    def successes(self, rate: str) -> int:
        return self.matched if rate == "number_match" else self.hits.get(rate, 0)

    def scored(self, rate: str) -> int:
        return int(self.generated or 0) if rate == "number_match" else self.trials.get(rate, 0)

    def _rate(self, out: dict, rate: str) -> None:
        """The rate, its interval and the count it is a share of, where it scored any record."""
        if self.scored(rate):
            out[RATES[rate]] = self.scored(rate)
            out[rate] = _pct(self.successes(rate), self.scored(rate))
            out[interval_key(rate)] = wilson_interval(self.successes(rate), self.scored(rate))

    def entry(self, retrieval_metrics: Sequence[str]) -> dict[str, float | int]:
        out: dict[str, float | int] = {"questions": self.questions}
        if self.generated is not None:
            out["generated"] = self.generated
            out["number_match"] = _pct(self.matched, self.generated)
            out[NM_INTERVAL] = wilson_interval(self.matched, self.generated)
            out["non_numeric_references"] = self.non_numeric
            for rate in ("exe_acc", "program_acc", "em"):
                self._rate(out, rate)
            if self.scored("em"):
                out["f1"] = _pct(self.f1_sum, self.scored("em"))
                out.update({key: self.errors.get(kind, 0) for kind, key in ERROR_COUNTS.items()})
                if self.percent_undecided:
                    out["percent_undecided"] = self.percent_undecided
                    out["em_if_percent"] = _pct(self.em_if_percent_hits, self.scored("em"))
        self._rate(out, "routing_acc")
        if self.scored("routing_acc"):
            out["routing_ndcg3"] = _pct(self.routing_ndcg_sum, self.scored("routing_acc"))
        if self.retrieved is not None:
            out["retrieved"] = self.retrieved
            for metric in retrieval_metrics:
                out[metric] = _pct(self.metric_sums.get(metric, 0.0), self.retrieved)
        return out


def scorecard_from_totals(
    totals: dict[str, SubsetTotals], retrieval_metrics: Sequence[str] = DEFAULT_RETRIEVAL_METRICS
) -> dict[str, dict]:
    """A scorecard, `{"subsets": {name: {...}}, "weighted": {...}}`, from per-subset totals."""
    per_subset = {name: totals[name].entry(retrieval_metrics) for name in ordered_subsets(list(totals))}
    weighted = weighted_average(per_subset)
    for rate in RATES:
        if rate in weighted:
            successes = sum(t.successes(rate) for t in totals.values())
            weighted[interval_key(rate)] = wilson_interval(successes, sum(t.scored(rate) for t in totals.values()))
    if "percent_undecided" in weighted:  # a subset without undecided golds counts its EM as it is
        hits = sum(t.em_if_percent_hits for t in totals.values())
        weighted["em_if_percent"] = _pct(hits, sum(t.scored("em") for t in totals.values()))
    return drop_empty_groups({"subsets": per_subset, "weighted": weighted})


def weighted_average(per_subset: dict[str, dict]) -> dict[str, float | int]:
    """Average every metric over subsets, weighting each subset by the questions that metric counted."""
    out: dict[str, float | int] = {"questions": sum(int(e["questions"]) for e in per_subset.values())}
    metrics: list[str] = []
    for entry in per_subset.values():
        metrics += [k for k in entry if k not in metrics and k not in ("questions", "generated", "retrieved")]
    for key in (*RATES.values(), "retrieved"):
        if any(key in e for e in per_subset.values()):
            out[key] = sum(int(e.get(key, 0)) for e in per_subset.values())
    for metric in metrics:
        if metric in out or metric.endswith("_ci95") or metric == "em_if_percent":
            continue  # not averages of the subsets that have them: scorecard_from_totals pools their counts
        if metric in SUMMED:
            out[metric] = sum(int(e.get(metric, 0)) for e in per_subset.values())
            continue
        weight_key = WEIGHTS.get(metric, "retrieved")
        pairs = [
            (float(e[metric]), int(e.get(weight_key, e["questions"])))
            for e in per_subset.values()
            if metric in e and not math.isnan(e[metric])
        ]
        total = sum(w for _, w in pairs)
        out[metric] = round(sum(v * w for v, w in pairs) / total, 4) if total else float("nan")
    return out


def drop_empty_groups(scorecard: dict) -> dict:
    """Leave out metric groups no question took part in (e.g. retrieval metrics of the oracle method)."""
    entries = [*scorecard["subsets"].values(), scorecard["weighted"]]
    drops: list[str] = []
    if all(e.get("generated", 1) == 0 for e in entries):
        drops += ["f1", *SUMMED, *(key for rate, n in ANSWER_RATES.items() for key in (n, rate, interval_key(rate)))]
    if all(e.get("retrieved", 1) == 0 for e in entries):
        drops += ["retrieved", *[k for k in scorecard["weighted"] if "@" in k]]
    for e in entries:
        for key in drops:
            e.pop(key, None)
    return scorecard


#: The record columns the metrics read.
METRIC_COLUMNS = ["method", "subset", "gold_rank", "number_match", "reference", "em", "f1", "em_error",
                  "percent_reading", "em_if_percent", "exe_acc", "program_acc", "routing_acc",
                  "routing_ndcg3"]  # fmt: skip


def _numbers(values: pa.ChunkedArray) -> np.ndarray:
    """A bool or float column as float64, null as 0."""
    return pc.cast(values, pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)


def _valid(values: pa.ChunkedArray) -> np.ndarray:
    return pc.is_valid(values).to_numpy(zero_copy_only=False)


def metric_values(table: pa.Table, retrieval_metrics: tuple[str, ...]) -> pa.Table:
    """Per-record values whose per-(method, subset) sums are the scorecard totals (see SubsetTotals).

    A record counts as generated when it has a Number Match verdict and as retrieved when it has a gold rank.
    """
    table = with_answer_columns(table)
    generated = pc.is_valid(table.column("number_match")).to_numpy(zero_copy_only=False)
    matched = generated & table.column("number_match").fill_null(False).to_numpy(zero_copy_only=False)
    non_numeric = generated & pc.is_null(table.column("reference")).to_numpy(zero_copy_only=False)
    retrieved = pc.is_valid(table.column("gold_rank")).to_numpy(zero_copy_only=False)
    ranks = table.column("gold_rank").fill_null(0).to_numpy(zero_copy_only=False)
    # An answer yardstick counts a generated record with its verdict; routing, a routed one.
    scored = {rate: _valid(table.column(rate)) & (generated if rate in ANSWER_RATES else True) for rate in FAMILY_RATES}
    right = {rate: _numbers(table.column(rate)) == 1 for rate in FAMILY_RATES}  # True (or EM's 1.0)
    errors = table.column("em_error").fill_null("").to_numpy(zero_copy_only=False)
    undecided = scored["em"] & (table.column("percent_reading").fill_null("").to_numpy(zero_copy_only=False)
                                == "undecided")  # fmt: skip
    em_if_percent = np.where(undecided, _numbers(table.column("em_if_percent")), _numbers(table.column("em")))
    columns = {
        "method": table.column("method"),
        "subset": table.column("subset"),
        "generated": generated.astype(np.int64),
        "matched": matched.astype(np.int64),
        "non_numeric": non_numeric.astype(np.int64),
        "retrieved": retrieved.astype(np.int64),
        **{f"{rate}_trials": scored[rate].astype(np.int64) for rate in FAMILY_RATES},
        **{f"{rate}_hits": (scored[rate] & right[rate]).astype(np.int64) for rate in FAMILY_RATES},
        "f1_sum": np.where(scored["em"], _numbers(table.column("f1")), 0.0),
        "routing_ndcg_sum": np.where(scored["routing_acc"], _numbers(table.column("routing_ndcg3")), 0.0),
        **{f"error_{kind}": (scored["em"] & (errors == kind)).astype(np.int64) for kind in ERROR_COUNTS},
        "percent_undecided": undecided.astype(np.int64),
        "em_if_percent_hits": (scored["em"] & (em_if_percent == 1)).astype(np.int64),
    }
    for metric in retrieval_metrics:
        columns[metric] = np.where(retrieved, per_query(metric, ranks), 0.0)
    return pa.table(columns)


def with_answer_columns(records: pa.Table) -> pa.Table:
    """`records` with the answer yardsticks' columns, null where a table lacks them (records read with other
    columns, or a predictions file scored before they existed)."""
    for name, dtype in {**ANSWER_SCORE_TYPES, **ROUTING_TYPES}.items():
        if name not in records.column_names:
            records = records.append_column(pa.field(name, dtype), pa.nulls(records.num_rows, dtype))
    return records


def scorecards_of(records: pa.Table, retrieval_metrics: tuple[str, ...] = DEFAULT_RETRIEVAL_METRICS) -> dict[str, dict]:
    """Each method's scorecard from records: the one scoring route of runs, reports and `t2rag score`.

    Methods come in order of first appearance; nothing is parsed or ranked again.
    """
    if records.num_rows == 0:
        return {}
    values = metric_values(records, retrieval_metrics)
    sums = [c for c in values.column_names if c not in ("method", "subset")]
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
            trials={rate: int(r[f"{rate}_trials_sum"]) for rate in FAMILY_RATES},
            hits={rate: int(r[f"{rate}_hits_sum"]) for rate in FAMILY_RATES},
            f1_sum=float(r["f1_sum_sum"]),
            routing_ndcg_sum=float(r["routing_ndcg_sum_sum"]),
            errors={kind: int(r[f"error_{kind}_sum"]) for kind in ERROR_COUNTS},
            percent_undecided=int(r["percent_undecided_sum"]),
            em_if_percent_hits=int(r["em_if_percent_hits_sum"]),
        )
    order = list(dict.fromkeys(records.column("method").to_pylist()))
    return {m: scorecard_from_totals(totals[m], retrieval_metrics) for m in order}


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
