"""Plain-text and markdown renderings of scorecards (t2rag.run_folder.scorecards)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from t2rag.run_folder.scorecards import NM_INTERVAL


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table with right-aligned numbers."""
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max([len(str(h)), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    numeric = [
        all(_is_num(row[i]) or row[i] is None for row in rows) and any(_is_num(row[i]) for row in rows)
        for i in range(len(header))
    ]
    head = "| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    rule = (
        "|"
        + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in zip(widths, numeric, strict=True))
        + "|"
    )
    body = [
        "| "
        + " | ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric, strict=True))
        + " |"
        for r in cells
    ]
    return "\n".join([head, rule, *body])


def _is_num(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _fmt(value: object) -> str:
    if isinstance(value, list | tuple) and len(value) == 2 and all(_is_num(v) for v in value):
        return "–" if any(math.isnan(v) for v in value) else f"[{value[0]:.1f}, {value[1]:.1f}]"  # an interval
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.2f}"
    if value is None:
        return "–"
    return str(value)


def scorecard_table(scorecard: dict) -> str:
    """Render a scorecard (`{"subsets": ..., "weighted": ...}`) with one row per subset plus the weighted row."""
    entries = dict(scorecard["subsets"])
    entries["W. Avg"] = scorecard["weighted"]
    metrics: list[str] = []
    for entry in entries.values():
        metrics += [k for k in entry if k not in metrics]
    rows = [[name, *(entry.get(m) for m in metrics)] for name, entry in entries.items()]
    return markdown_table(["subset", *(LABELS.get(m, m) for m in metrics)], rows)


#: Column labels where a metric's key is not what a reader should see.
LABELS = {NM_INTERVAL: "NM 95% CI"}


def with_intervals(metrics: Sequence[str]) -> list[str]:
    """The metrics with Number Match's 95% interval placed right after it."""
    out: list[str] = []
    for m in metrics:
        out += [m, NM_INTERVAL] if m == "number_match" else [m]
    return out


def method_columns(
    methods: dict[str, dict], metrics: Sequence[str], labels: dict[str, str] = LABELS
) -> tuple[list[str], list[list[object]]]:
    """Table-3 shape as (header, rows): one row per method, one column per (subset, metric) and the weighted
    average; Number Match comes with its 95% interval. `labels` rename metrics in the header."""
    metrics = with_intervals(metrics)
    first = next(iter(methods.values()), {"subsets": {}})
    subsets = list(first["subsets"])
    header = ["method"] + [f"{s} {labels.get(m, m)}" for s in [*subsets, "W. Avg"] for m in metrics]
    rows = []
    for name, scorecard in methods.items():
        row: list[object] = [name]
        for s in [*subsets, "W. Avg"]:
            entry = scorecard["weighted"] if s == "W. Avg" else scorecard["subsets"].get(s, {})
            row += [entry.get(m) for m in metrics]
        rows.append(row)
    return header, rows


def methods_table(methods: dict[str, dict], metrics: Sequence[str]) -> str:
    """`method_columns` as a markdown table."""
    return markdown_table(*method_columns(methods, metrics))
