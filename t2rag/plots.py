"""Plots for reports, rendered to PNG bytes (matplotlib's Agg backend, no display needed)."""

from __future__ import annotations

import io


def plot_corpus_size(table, synthetic: bool = False) -> bytes:
    """MRR@3 against corpus size (documents, log axis) with standard-deviation error bars across seeds, one panel
    per subset (the paper's Figure 4, extended upward); a synthetic run says so in every title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return buf.getvalue()


def plot_methods(rows: list[tuple[str, float, float]]) -> bytes:
    """Bars of weighted Number Match and MRR@3 per method (values may be NaN)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = [r[0] for r in rows]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(names)), 3.6))
    ax.bar(x - 0.2, [r[1] for r in rows], width=0.4, label="Number Match")
    ax.bar(x + 0.2, [r[2] for r in rows], width=0.4, label="MRR@3")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("% (weighted over subsets)")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return buf.getvalue()
