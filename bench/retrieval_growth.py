"""How retrieval quality falls as the corpus grows, on the dev sample: the corpus-size ablation walked downward.

    python bench/retrieval_growth.py                         # bm25, bm25_meta, bm25_page, bm25_focus; 10 seeds
    python bench/retrieval_growth.py --methods bm25_page --seeds 3 --json

For each subset, seed and share, a seeded random share of the subset's contexts is the corpus (the paper's Figure
4) and every question whose gold context is in it is searched against it, with the retriever indexed on that corpus
alone (its idf, metadata and page statistics too). The cells are `ray_jobs.ablate_corpus_size.run_cells`, run here
in one process. Printed: MRR@3 and Recall@1 per share, question-weighted over both subsets and averaged over seeds
(the 100% share is one corpus, the same for every seed), and the fall from 50% to 100%: what doubling a corpus costs
a method, which is what a user meets when the paper's corpus (every split, about ten times the dev split) is
searched. The fused methods run with the weights they ship (fitted on this same dev sample): the fall measures
what a larger corpus adds that they cannot tell apart, not how well the weights generalise.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ray_jobs.ablate_corpus_size import run_cells
from t2rag.config import load_config
from t2rag.resources import Resources

METHODS = "bm25,bm25_meta,bm25_page,bm25_focus"
SHARES = "0.25,0.5,1.0"


def growth_cells(data: str | None, methods: list[str], shares: list[float], seeds: int) -> list[dict]:
    """Every (subset, seed, share, method) cell."""
    config = load_config(None, {"data": {"source": data}, "methods": methods, "retrieval_only": True})
    resources = Resources(config)
    cells = []
    for subset in resources.questions.subsets:
        own = len(resources.corpus(subset))
        sizes = sorted({max(1, round(f * own)) for f in shares})
        empty = np.zeros((own, 0), np.float32)
        for seed in range(seeds):
            for cell in run_cells(config.model_dump_json(), subset, sizes, seed, methods, empty, None, None, None):
                cells.append({**cell, "share": round(cell["size"] / own, 2)})
    return cells


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
        for metric in ("mrr@3", "recall@1"):
            if {f"{metric} 50%", f"{metric} 100%"} <= row.keys():
                row[f"{metric} fall 50->100%"] = round(row[f"{metric} 50%"] - row[f"{metric} 100%"], 2)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None, help="a source in the hub layout (default: the bundled dev sample)")
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--shares", default=SHARES, help="shares of each subset's corpus")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print the table as JSON only")
    args = parser.parse_args()
    methods, shares = args.methods.split(","), [float(s) for s in args.shares.split(",")]
    start = time.perf_counter()
    rows = growth_table(growth_cells(args.data, methods, shares, args.seeds), methods, shares)
    if args.json:
        print(json.dumps(rows))
        return
    seconds = time.perf_counter() - start
    print(f"MRR@3 and Recall@1 as the dev corpus grows (mean over {args.seeds} seeds; {seconds:.0f} s)")
    head = [f"MRR@3 {s:.0%}" for s in shares] + ["MRR@3 fall 50->100%"]
    head += [f"R@1 {s:.0%}" for s in shares] + ["R@1 fall 50->100%"]
    print("| method | " + " | ".join(head) + " |")
    print("|---|" + "--:|" * len(head))
    for row in rows:
        cells = [row[f"mrr@3 {s:.0%}"] for s in shares] + [row.get("mrr@3 fall 50->100%", "")]
        cells += [row[f"recall@1 {s:.0%}"] for s in shares] + [row.get("recall@1 fall 50->100%", "")]
        print(f"| `{row['method']}` | " + " | ".join(f"{c:.2f}" if c != "" else "" for c in cells) + " |")


if __name__ == "__main__":
    main()
