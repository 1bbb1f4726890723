"""`t2rag report SWEEP_OUT`: the sweep's table, its best trial against the runner-up, the quality-against-cost plot
with its Pareto frontier, and the objective against each swept key, under `SWEEP_OUT/report/`."""

from __future__ import annotations

import math
from typing import Any

from t2rag.reference import TABLE4_METRICS
from t2rag.storage import join, read_bytes, write_bytes
from t2rag.sweep.spec import SWEEP_FILE
from t2rag.sweep.table import TABLE_FILES, SweepTable, TrialRow, sweep_table, table_rows

REPORT_DIR = "report"

TABLE4_NOTE = (
    "The paper's Table 4 gives only the average over its four subsets (VQAonBD included), weighted by question "
    "counts, with no per-subset values, so it cannot be recomputed over this sweep's subsets: read the two sides "
    "as the same metric on different corpora.\n\n"
)


def embedder_averages(header: list[str], rows: list[list[object]]) -> dict[str, dict[str, float]]:
    """Model id -> its weighted Table 4 metrics, from an embedder sweep's Table 4."""
    col = {h: i for i, h in enumerate(header)}
    return {r[0]: {m: r[col[f"weighted {m}"]] for m in TABLE4_METRICS} for r in rows}


def is_sweep_folder(path: str) -> bool:
    return read_bytes(join(path, SWEEP_FILE)) is not None


def write_sweep_report(out: str, table: SweepTable | None = None) -> dict[str, str]:
    """Write the sweep's report files (from its `table`, else the table read anew); returns their paths by kind
    (`report`: the markdown page)."""
    table = table or sweep_table(out)
    written = {kind: join(out, name) for kind, name in TABLE_FILES.items()}
    finished = [r for r in table.rows if r.objective is not None]
    if finished:
        path = join(out, REPORT_DIR, "quality_vs_cost.png")
        write_bytes(path, plot_quality_vs_cost(table, finished))
        written["quality_vs_cost"] = path
        for key in table.swept:
            path = join(out, REPORT_DIR, f"by_{key.replace('.', '_')}.png")
            write_bytes(path, plot_by_key(table, finished, key))
            written[f"by {key}"] = path
    extra = table4_section(out, table, written)
    page = join(out, REPORT_DIR, "sweep.md")
    write_bytes(page, (render(table, written) + extra).encode())
    written["report"] = page
    return written


def varies_embedder(table: SweepTable) -> bool:
    return any(k == "retrieval.embedder" or k.startswith("retrieval.embedder.") for k in table.swept)


def table4_rows(out: str, table: SweepTable) -> tuple[list[str], list[list[Any]]]:
    """An embedder sweep as the paper's Table 4: per embedder (model, max_seq_length) its R@1, R@5 and MRR@5 per
    subset and weighted, from each finished trial's scorecard."""
    from t2rag.run_folder.files import read_manifest, read_result

    header, rows = ["model", "max_seq_length"], []
    for r in table.rows:
        if r.status != "finished" or r.final:
            continue
        card = (read_result(r.out) or {})["methods"][r.method]
        embedder = (read_manifest(r.out) or {})["config"]["retrieval"]["embedder"]
        parts = [*card["subsets"].items(), ("weighted", card["weighted"])]
        if len(header) == 2:
            header += [f"{name} {m}" for name, _ in parts for m in TABLE4_METRICS]
        rows.append([embedder["model"], embedder.get("max_seq_length") or "model default",
                     *(entry.get(m) for _, entry in parts for m in TABLE4_METRICS)])  # fmt: skip
    return header, rows


def table4_section(out: str, table: SweepTable, written: dict[str, str]) -> str:
    """Table 4 and Table 4 beside the paper's, for a sweep over embedders (else nothing)."""
    if not varies_embedder(table) or not any(r.status == "finished" for r in table.rows):
        return ""
    from t2rag.reference import compare_table4, load_paper
    from t2rag.results.tables import markdown_table

    header, rows = table4_rows(out, table)
    beside = compare_table4(load_paper(), embedder_averages(header, rows))
    parts = []
    for name, title, (h, r) in (("table4", "Table 4: embedding models", (header, rows)),
                                ("table4_paper", "Table 4 beside the paper's", beside)):  # fmt: skip
        text = markdown_table(h, r)
        path = join(out, REPORT_DIR, f"{name}.md")
        write_bytes(path, (text + "\n").encode())
        written[name] = path
        parts += [f"## {title}", "", text, ""]
    return "\n".join(["", *parts, TABLE4_NOTE, ""])


def headline(table: SweepTable) -> str:
    """A few lines: how many trials finished, the best one and how sure its lead is."""
    done = sum(r.status == "finished" for r in table.rows)
    failed = [r for r in table.rows if r.status == "failed"]
    o = table.objective
    lines = [f"Sweep {table.name}: {done} of {len(table.rows)} trials finished"
             + (f", {len(failed)} failed" if failed else "")]  # fmt: skip
    if table.best is not None:
        best = next(r for r in table.rows if r.trial == table.best)
        lines.append(f"Best by {o.metric} ({o.subset}, {o.mode}): {best.trial} = {best.objective}")
    test = table.best_vs_runner_up
    if test and "p_value" in test:
        lines.append(f"  against the runner-up {table.runner_up}: {test['diff']:+.2f} points, 95% CI "
                     f"[{test['ci95'][0]:.2f}, {test['ci95'][1]:.2f}], p = {test['p_value']:.3g} ({test['test']}, "
                     f"{test['questions']} questions)")  # fmt: skip
    if table.model_loads:
        loads = ", ".join(f"{m} x{n}" for m, n in table.model_loads.items())
        lines.append(f"Model loads over the sweep's runs: {loads}")
    if table.pareto:
        lines.append(f"Pareto frontier (quality against seconds): {', '.join(table.pareto)}")
    for r in failed:
        lines.append(f"failed: {r.trial}: {r.error}")
    return "\n".join(lines)


def render(table: SweepTable, written: dict[str, str]) -> str:
    from t2rag.results.tables import markdown_table

    header, rows = table_rows(table)
    parts = [f"# Sweep {table.name}", "", headline(table).replace("\n", "  \n"), "", markdown_table(header, rows), ""]
    for kind, path in written.items():
        if path.endswith(".png"):
            parts += [f"## {kind.replace('_', ' ')}", "", f"![{kind}]({path.rsplit('/', 1)[-1]})", ""]
    return "\n".join(parts)


def plot_quality_vs_cost(table: SweepTable, rows: list[TrialRow]) -> bytes:
    from t2rag.results.plots import _png, _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [r.seconds or 0.0 for r in rows]
    ys = [r.objective for r in rows]
    ax.scatter(xs, ys, color="#888", zorder=2)
    for r, x, y in zip(rows, xs, ys, strict=True):
        ax.annotate(r.trial, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    front = sorted((r for r in rows if r.trial in table.pareto), key=lambda r: r.seconds or 0.0)
    if front:
        ax.plot([r.seconds for r in front], [r.objective for r in front], "-o", color="#c0392b", zorder=3,
                label="Pareto frontier")  # fmt: skip
        ax.legend(loc="lower right")
    o = table.objective
    ax.set_xlabel("seconds (the run's measured wall time)")
    ax.set_ylabel(f"{o.metric} ({o.subset}, %)")
    ax.set_title(f"{table.name}: quality against cost")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig, plt)


def plot_by_key(table: SweepTable, rows: list[TrialRow], key: str) -> bytes:
    from t2rag.results.plots import _png, _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    values = [_plain(r.values.get(key)) for r in rows]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    if numeric:
        ax.scatter(values, [r.objective for r in rows])
    else:
        labels = list(dict.fromkeys(map(str, values)))
        ax.scatter([labels.index(str(v)) for v in values], [r.objective for r in rows])
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    o = table.objective
    ax.set_xlabel(key)
    ax.set_ylabel(f"{o.metric} ({o.subset}, %)")
    ax.set_title(f"{o.metric} by {key}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig, plt)


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return "+".join(map(str, value))
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
