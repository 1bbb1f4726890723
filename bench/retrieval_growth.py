"""How retrieval quality falls as the corpus grows, on the dev sample: the corpus-size ablation walked downward.

    python bench/retrieval_growth.py                         # bm25, bm25_meta, bm25_page, bm25_focus; 10 seeds
    python bench/retrieval_growth.py --methods bm25_page --seeds 3 --json
    python bench/retrieval_growth.py --distractors ../shared/data/t2ragbench-test-contexts   # dev + test contexts

For each subset, seed and share, a seeded random share of the subset's contexts is the corpus (the paper's Figure
4) and every question whose gold context is in it is searched against it, with the retriever indexed on that corpus
alone (its idf, metadata and page statistics too). The cells are `ray_jobs.ablate_corpus_size.run_cells`, run here
in one process. Printed: MRR@3 and Recall@1 per share, question-weighted over both subsets and averaged over seeds
(the 100% share is one corpus, the same for every seed), and the fall from 50% to 100%: what doubling a corpus costs
a method, which is what a user meets when the paper's corpus (every split, about ten times the dev split) is
searched. The fused methods run with the weights they ship (fitted on this same dev sample): the fall measures
what a larger corpus adds that they cannot tell apart, not how well the weights generalise. The fall's own
sampling error (which questions the dev split holds) comes from resampling the gold contexts (`--bootstrap`).

With `--distractors` (a corpus-only source such as the test split's contexts), each subset's corpus is its dev
contexts and those (`data.distractors`), and the shares are of that larger corpus: every dev question whose gold
context is kept is searched. Subsampling the dev split alone never shows a report with more pages than dev holds;
the larger corpus does, so beside each share the table gives its pages per report (contexts per company and report
year, `Corpus.reports`), to read the fall against what grows.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ray_jobs.ablate_corpus_size import cell_corpus, run_cells
from t2rag.config import load_config
from t2rag.data.corpus import Corpus
from t2rag.metrics.retrieval import per_query
from t2rag.resources import Resources

METHODS = "bm25,bm25_meta,bm25_page,bm25_focus"
SHARES = "0.25,0.5,1.0"


def growth_cells(
    data: str | None, methods: list[str], shares: list[float], seeds: int, distractors: str | None = None
) -> list[dict]:
    """Every (subset, seed, share, method) cell, with the pages per report of its corpus."""
    config = load_config(None, {"data": {"source": data, "distractors": distractors}, "methods": methods,
                                "retrieval_only": True})  # fmt: skip
    resources = Resources(config)
    cells = []
    for subset in resources.questions.subsets:
        corpus = resources.corpus(subset)
        own = len(corpus)
        sizes = sorted({max(1, round(f * own)) for f in shares})
        empty = np.zeros((own, 0), np.float32)
        for seed in range(seeds):
            pages = {size: pages_per_report(cell_corpus(corpus, size, seed, None)[0]) for size in sizes}
            args = (config.model_dump_json(), subset, sizes, seed, methods, empty, None, None, None)
            for cell in run_cells(*args, per_question=True):
                cells.append({**cell, "share": round(cell["size"] / own, 2), "pages_per_report": pages[cell["size"]]})
    return cells


def pages_per_report(corpus: Corpus) -> float:
    """Contexts per report (company and report year) in a corpus."""
    return len(corpus) / max(len(set(corpus.reports)), 1)


def growth_table(cells: list[dict], methods: list[str], shares: list[float]) -> list[dict]:
    """Per method: MRR@3 and Recall@1 per share (question-weighted over subsets, mean over seeds) and the fall from
    50% to 100% of the corpus."""
    rows = []
    for method in methods:
        row: dict = {"method": method}
        for share in shares:
            mine = [c for c in cells if c["method"] == method and c["share"] == round(share, 2)]
            seeds = sorted({c["seed"] for c in mine})
            for metric in ("mrr@3", "recall@1"):
                per_seed = []
                for seed in seeds:
                    part = [c for c in mine if c["seed"] == seed]
                    n = sum(c["questions"] for c in part)
                    per_seed.append(sum(c[metric] * c["questions"] for c in part) / max(n, 1))
                row[f"{metric} {share:.0%}"] = round(float(np.mean(per_seed)), 2)
                row[f"{metric} {share:.0%} sd"] = round(float(np.std(per_seed)), 2)
            n = sum(c["questions"] for c in mine)
            pages = sum(c["pages_per_report"] * c["questions"] for c in mine) / max(n, 1)
            row[f"pages per report {share:.0%}"] = round(pages, 2)  # question-weighted over subsets and seeds
        for metric in ("mrr@3", "recall@1"):
            if {f"{metric} 50%", f"{metric} 100%"} <= row.keys():
                row[f"{metric} fall 50->100%"] = round(row[f"{metric} 50%"] - row[f"{metric} 100%"], 2)
        rows.append(row)
    return rows


def fall_spread(cells: list[dict], method: str, rounds: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """The fall from 50% to 100% of the corpus under a bootstrap over the gold contexts (a context's questions drawn
    together, as they share what makes them hard): per metric, its standard deviation and 90% interval over
    `rounds` resamples, each scored as `growth_table` scores the cells."""
    mine = [c for c in cells if c["method"] == method and c["share"] in (0.5, 1.0)]
    keys = sorted({(c["subset"], g) for c in mine if c["share"] == 1.0 for g in c["gold"]})
    position = {key: i for i, key in enumerate(keys)}
    draws = np.random.default_rng(seed).multinomial(len(keys), np.full(len(keys), 1 / len(keys)), size=rounds)
    sums: dict[tuple, np.ndarray] = {}  # (metric, share, seed) -> per round [weighted hits, weight]
    for c in mine:
        at = [position[(c["subset"], g)] for g in c["gold"]]
        weight = draws[:, at].astype(np.float64)
        for metric in ("mrr@3", "recall@1"):
            key = (metric, c["share"], c["seed"] if c["share"] == 0.5 else 0)
            part = np.stack([weight @ per_query(metric, np.asarray(c["ranks"])), weight.sum(axis=1)])
            sums[key] = sums.get(key, 0) + part
    out = {}
    for metric in ("mrr@3", "recall@1"):
        at = {share: [100 * v[0] / np.maximum(v[1], 1) for k, v in sums.items() if k[:2] == (metric, share)]
              for share in (0.5, 1.0)}  # fmt: skip
        falls = np.mean(at[0.5], axis=0) - np.mean(at[1.0], axis=0)
        low, high = np.percentile(falls, [5, 95])
        out[metric] = {"sd": round(float(np.std(falls)), 2), "low": round(float(low), 2), "high": round(float(high), 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None, help="a source in the hub layout (default: the bundled dev sample)")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--shares", default=SHARES, help="shares of each subset's corpus")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--distractors", default=None, help="a corpus-only source whose contexts join each "
                        "subset's (the test split's: the paper's larger corpus)")  # fmt: skip
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples of the gold contexts for the fall's "
                        "spread (0: none)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the table as JSON only")
    args = parser.parse_args()
    methods, shares = args.methods.split(","), [float(s) for s in args.shares.split(",")]
    start = time.perf_counter()
    cells = growth_cells(args.data, methods, shares, args.seeds, args.distractors)
    rows = growth_table(cells, methods, shares)
    if args.bootstrap and {0.5, 1.0} <= set(shares):
        for row in rows:
            row["fall spread"] = fall_spread(cells, row["method"], args.bootstrap)
    if args.json:
        print(json.dumps(rows))
        return
    seconds = time.perf_counter() - start
    grown = "dev + distractor" if args.distractors else "dev"
    print(f"MRR@3 and Recall@1 as the {grown} corpus grows (mean over {args.seeds} seeds; {seconds:.0f} s)")
    print("pages per report: " + ", ".join(f"{s:.0%} {rows[0][f'pages per report {s:.0%}']:.2f}" for s in shares))
    head = [f"MRR@3 {s:.0%}" for s in shares] + ["MRR@3 fall 50->100%"]
    head += [f"R@1 {s:.0%}" for s in shares] + ["R@1 fall 50->100%"]
    print("| method | " + " | ".join(head) + " |")
    print("|---|" + "--:|" * len(head))
    for row in rows:
        values = [row[f"mrr@3 {s:.0%}"] for s in shares] + [row.get("mrr@3 fall 50->100%", "")]
        values += [row[f"recall@1 {s:.0%}"] for s in shares] + [row.get("recall@1 fall 50->100%", "")]
        print(f"| `{row['method']}` | " + " | ".join(f"{c:.2f}" if c != "" else "" for c in values) + " |")
    if any("fall spread" in row for row in rows):
        print(f"\nThe fall's spread over {args.bootstrap} resamples of the gold contexts (sd; 90% interval)")
        print("| method | MRR@3 fall 50->100% | R@1 fall 50->100% |\n|---|--:|--:|")
        for row in rows:
            spread = [row["fall spread"][m] for m in ("mrr@3", "recall@1")]
            text = [f"{row[f'{m} fall 50->100%']:.2f} ± {s['sd']:.2f} ({s['low']:.2f} to {s['high']:.2f})"
                    for m, s in zip(("mrr@3", "recall@1"), spread, strict=True)]  # fmt: skip
            print(f"| `{row['method']}` | " + " | ".join(text) + " |")


if __name__ == "__main__":
    main()
