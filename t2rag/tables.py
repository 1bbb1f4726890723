"""Plain-text and markdown renderings of metric summaries."""

from __future__ import annotations

import math
from collections.abc import Sequence


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured markdown table with right-aligned numbers."""
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max([len(str(h)), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    numeric = [all(_is_num(row[i]) for row in rows) and rows for i in range(len(header))]
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
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.2f}"
    if value is None:
        return "–"
    return str(value)


def summary_table(summary: dict) -> str:
    """Render a `{"subsets": ..., "weighted": ...}` summary with one row per subset plus the weighted row."""
    entries = dict(summary["subsets"])
    entries["W. Avg"] = summary["weighted"]
    metrics: list[str] = []
    for entry in entries.values():
        metrics += [k for k in entry if k not in metrics]
    rows = [[name, *(entry.get(m) for m in metrics)] for name, entry in entries.items()]
    return markdown_table(["subset", *metrics], rows)


def methods_table(methods: dict[str, dict], metrics: Sequence[str]) -> str:
    """Table-3 shape: one row per method, one column per (subset, metric) and the weighted average."""
    first = next(iter(methods.values()), {"subsets": {}})
    subsets = list(first["subsets"])
    header = ["method"] + [f"{s} {m}" for s in [*subsets, "W. Avg"] for m in metrics]
    rows = []
    for name, summary in methods.items():
        row: list[object] = [name]
        for s in [*subsets, "W. Avg"]:
            entry = summary["weighted"] if s == "W. Avg" else summary["subsets"].get(s, {})
            row += [entry.get(m) for m in metrics]
        rows.append(row)
    return markdown_table(header, rows)
