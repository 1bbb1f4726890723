"""Why methods differ, from a run's records: where answers were lost (outcomes, the gap to the oracle), which
differences are real (paired tests), and the headline a person reads first. Used by `t2rag report`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyarrow as pa

from t2rag.methods import readers_of
from t2rag.reference import PaperReference
from t2rag.results.plots import plot_number_match
from t2rag.results.significance import ALL_SUBSETS, Difference, pairwise, significant
from t2rag.results.tables import markdown_table
from t2rag.run_folder.outcomes import OUTCOMES, oracle_gap, outcome_counts, with_outcomes
from t2rag.run_folder.scorecards import NM_INTERVAL, ordered_subsets

#: The metrics the report tests between every pair of methods.
TESTED_METRICS = ("number_match", "em", "f1", "exe_acc", "program_acc", "mrr@3", "recall@3", "routing_acc")
#: The metrics whose differences the headline lists first, and how many it lists.
LEAD = ("number_match", "mrr@3")
SHOWN = 8
ORACLE = "oracle"


def run_k(manifest: dict | None) -> int:
    """How many ranked contexts the run's generator read (its config's `retrieval.k`; 3 when unknown)."""
    return int((((manifest or {}).get("config") or {}).get("retrieval") or {}).get("k") or 3)


def attributed(records: pa.Table, manifest: dict | None) -> pa.Table:
    """The records with every answered record's outcome (computed for records written before the column)."""
    recorded = ((manifest or {}).get("plugins") or {}).get("methods")
    return with_outcomes(records, run_k(manifest), readers_of(records.column("method").to_pylist(), recorded))


def outcome_table(records: pa.Table, methods: Sequence[str]) -> tuple[list[str], list[list[object]]]:
    """Per method and subset (and all subsets): answered records and each outcome's share in percent."""
    counts = outcome_counts(records)
    header = ["method", "subset", "answered", *(f"{o} %" for o in OUTCOMES)]
    rows = []
    for method in methods:
        cells = counts.get(method, {})
        for subset in ordered_subsets([s for s in cells if s != "all"]) + (["all"] if cells else []):
            n = sum(cells[subset].values())
            rows.append([method, subset, n, *(round(100 * cells[subset][o] / n, 2) for o in OUTCOMES)])
    return header, rows


def gap_table(records: pa.Table, methods: Sequence[str]) -> tuple[list[str], list[list[object]]]:
    """Each method's Number Match gap to the oracle, split into what retrieval and reading lost (points)."""
    header = ["method", "questions", "NM", "oracle NM", "gap", "lost to retrieval", "lost to reading", "gained"]
    if ORACLE not in methods:
        return header, []
    rows = []
    for method in methods:
        gap = oracle_gap(records, method, ORACLE) if method != ORACLE else None
        if gap is not None:
            rows.append([method, gap["questions"], gap["method_nm"], gap["oracle_nm"], gap["gap"],
                         gap["lost_to_retrieval"], gap["lost_to_reading"], gap["gained"]])  # fmt: skip
    return header, rows


def differences(records: pa.Table, methods: Sequence[str]) -> tuple[list[Difference], list[bool]]:
    """Every pair of methods on `TESTED_METRICS`, and which hold after Holm's correction."""
    found = pairwise(records, methods, TESTED_METRICS)
    return found, significant(found)


def difference_rows(found: Sequence[Difference], held: Sequence[bool]) -> tuple[list[str], list[list[object]]]:
    header = ["methods", "subset", "metric", "a", "b", "a - b", "95% CI", "p", "test", "questions", "holds (Holm)"]
    rows = [[d.method, d.subset, d.metric, d.a, d.b, d.diff, d.ci95, _p(d.p_value), d.test, d.questions,
             "yes" if ok else "no"] for d, ok in zip(found, held, strict=True)]  # fmt: skip
    return header, rows


def _p(p: float) -> str:
    return "< 0.0001" if p < 1e-4 else f"{p:.4f}"


def headline_rows(scorecards: dict[str, dict]) -> list[dict[str, object]]:
    """Per method, over all subsets: answered records, Number Match with its interval, MRR@3 and Recall@3 (None
    where not measured)."""
    rows = []
    for method, scorecard in scorecards.items():
        w = scorecard["weighted"]
        rows.append({"method": method, "answered": w.get("generated", 0), "number_match": w.get("number_match"),
                     "number_match_ci95": w.get(NM_INTERVAL), "mrr@3": w.get("mrr@3"),
                     "recall@3": w.get("recall@3")})  # fmt: skip
    return rows


def number_match_plot(scorecards: dict[str, dict]) -> bytes | None:
    """The Number Match plot (with intervals) of the methods that answered; None when none did."""
    points = [(r["method"], r["number_match"], *r["number_match_ci95"], r["answered"])
              for r in headline_rows(scorecards) if r["answered"] and r["number_match"] is not None]  # fmt: skip
    return plot_number_match(points) if points else None


def headline(
    scorecards: dict[str, dict],
    records: pa.Table,
    paper: PaperReference,
    found: Sequence[Difference],
    held: Sequence[bool],
    files: dict[str, str],
    setting_differences: Sequence[str] = (),
) -> str:
    """What a person reads first: the headline metrics beside the paper's (and how the run's setting differs from
    the paper's), the differences that hold, where answers were lost, and which file holds the rest."""
    methods = list(scorecards)
    subsets = sorted({s for m in scorecards.values() for s in m["subsets"]})
    generators = list(paper.setting.generators)
    header = ["method", "answered", "NM", "NM 95% CI", "MRR@3", "R@3"]
    header += [f"paper NM ({paper.setting.generators[g].name})" for g in generators] + ["paper MRR@3"]
    rows = []
    for row in headline_rows(scorecards):
        method = row["method"]
        cells = [*row.values()]
        cells += [paper.weighted(g, method, subsets, "number_match") for g in generators]
        cells.append(paper.weighted(generators[0], method, subsets, "mrr@3") if generators else None)
        rows.append([_rounded(v) for v in cells])
    parts = [f"Weighted over {', '.join(subsets)} ('–': not measured; the paper's values recomputed over these "
             "subsets):\n", markdown_table(header, rows), ""]  # fmt: skip
    if setting_differences:
        parts += ["The run's setting differs from the paper's, so these are not a reproduction gap:",
                  *(f"- {d}" for d in setting_differences), ""]  # fmt: skip
    holding = [d for d, ok in zip(found, held, strict=True) if ok and d.subset == ALL_SUBSETS and d.metric in LEAD]
    holding.sort(key=lambda d: (LEAD.index(d.metric), -abs(d.diff)))
    lines = [
        f"- {d.metric}: {d.method}: {d.a:.2f} against {d.b:.2f}, {d.diff:+.2f} points "
        f"[{d.ci95[0]:+.2f}, {d.ci95[1]:+.2f}], p {_p(d.p_value)} ({d.test}, {d.questions} questions)"
        for d in holding[:SHOWN]
    ]
    if len(holding) > SHOWN:
        lines.append(f"- and {len(holding) - SHOWN} more (significance.md)")
    parts.append(f"Differences that hold at 0.05 after Holm's correction, all subsets ({', '.join(LEAD)}; "
                 "the largest first):")  # fmt: skip
    parts += lines or ["- none" if found else "- one method: nothing to compare"]
    gap_header, gaps = gap_table(records, methods)
    if gaps:
        parts += ["", "Where answers were lost against the oracle (Number Match points over the same questions):",
                  markdown_table(gap_header, gaps)]  # fmt: skip
    folders = {path.rsplit("/", 1)[0] for path in files.values()}
    where = folders.pop() if len(folders) == 1 else "the report folder"
    names = ", ".join(path.rsplit("/", 1)[-1] for path in files.values())
    parts += ["", f"Everything else is in {where}: {names}."]
    return "\n".join(parts) + "\n"


def _rounded(value: object) -> object:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 2)
    return value
