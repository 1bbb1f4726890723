"""Plots for reports, rendered to PNG bytes (matplotlib's Agg backend, no display needed)."""

from __future__ import annotations

import io


def plot_corpus_size(table, synthetic: bool = False) -> bytes:
    """MRR@3 against corpus size (documents, log axis) with standard-deviation error bars across seeds, one panel
    per subset (the paper's Figure 4, extended upward); a synthetic run says so in every title."""
    plt = _pyplot()
    subsets = list(dict.fromkeys(table["subset"]))
    fig, axes = plt.subplots(1, len(subsets), figsize=(5 * len(subsets), 3.6), squeeze=False, sharey=True)
    for ax, subset in zip(axes[0], subsets, strict=True):
        part = table[table["subset"] == subset]
        for method in dict.fromkeys(part["method"]):
            rows = part[part["method"] == method].sort_values("documents")
            ax.errorbar(
                rows["documents"],
                rows["mrr3_mean"],
                yerr=rows["mrr3_std"].fillna(0),
                marker="o",
                capsize=3,
                label=method,
            )
        ax.set_title(f"{subset}, synthetic distractors (timing only)" if synthetic else subset, fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel("corpus size (documents)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("MRR@3 (%)")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    return _png(fig, plt)


def plot_rank_curves(curves: dict[str, dict[str, list[float | None]]], ks: list[int]) -> bytes:
    """MRR@k and Recall@k against k, one line per method (curves: method -> {"mrr": [...], "recall": [...]},
    percentages over all of the method's questions; None where a method's lists are shorter than k)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    for ax, (key, title) in zip(axes, (("mrr", "MRR@k"), ("recall", "Recall@k")), strict=True):
        for method, values in curves.items():
            points = [(k, v) for k, v in zip(ks, values[key], strict=True) if v is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=method)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("k (contexts taken from the ranking)")
        ax.set_xticks(ks)
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("% of questions (all subsets)")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return _png(fig, plt)


def plot_number_match(rows: list[tuple[str, float, float, float, int]]) -> bytes:
    """Weighted Number Match per method as bars with their 95% intervals (rows: method, value, low, high,
    answers generated)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(rows)), 3.8))
    x = list(range(len(rows)))
    values = [r[1] for r in rows]
    below = [r[1] - r[2] for r in rows]
    above = [r[3] - r[1] for r in rows]
    ax.bar(x, values, width=0.6, color="#4c72b0")
    ax.errorbar(x, values, yerr=[below, above], fmt="none", ecolor="black", capsize=4, linewidth=1)
    for i, r in enumerate(rows):
        ax.annotate(f"n={r[4]}", (i, r[3]), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    ax.set_xticks(x, [r[0] for r in rows], rotation=30, ha="right")
    ax.set_xlim(-0.8, len(rows) - 0.2)
    ax.set_ylim(0, 100)
    ax.set_ylabel("Number Match (%), 95% interval")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig, plt)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig, plt) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return buf.getvalue()
