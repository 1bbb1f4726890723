"""What each page-evidence feature adds to bm25_page (issue 43), fitted as `t2rag fit-fusion` fits, dev only.

For bm25_meta's components, then bm25_page's with each page feature left out in turn, then all of them: the listwise
fit's weights on every dev question (in-sample MRR@3 and Recall@1) and on each half of the questions split by gold
context, scored on the other half (held-out). Usage: python bench/page_evidence.py [--data SOURCE]
"""

from __future__ import annotations

import argparse

from t2rag.config import load_config
from t2rag.resources import Resources
from t2rag.retrieval.fusion.fit import fit_subsets, fit_weights, held_out, score_weights, subset_parts
from t2rag.retrieval.fusion.weighted import FUSED_METHODS
from t2rag.retrieval.page_evidence.features import PAGE_FEATURES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    config = load_config(None, {"methods": ["bm25_page"], "data": {"source": args.data, "split": "dev"}})
    resources = Resources(config)
    subsets = fit_subsets(resources.questions, resources.corpus)
    parts = [subset_parts(config.retrieval, "bm25_page", s) for s in subsets.values()]
    everything = FUSED_METHODS["bm25_page"].components
    rows = [("bm25_meta's components", FUSED_METHODS["bm25_meta"].components)]
    rows += [(f"bm25_page without {f}", tuple(c for c in everything if c != f)) for f in PAGE_FEATURES]
    rows += [("bm25_page", everything)]
    print("| components | MRR@3 | R@1 | held-out MRR@3 | held-out R@1 |\n|---|--:|--:|--:|--:|")
    for label, components in rows:
        fitted, unseen = score_weights(parts, fit_weights(parts, components, None), None), held_out(parts, components)
        print(
            f"| {label} | {fitted.mrr_at_3:.2f} | {fitted.recall_at_1:.2f} | {unseen.mrr_at_3:.2f} | "
            f"{unseen.recall_at_1:.2f} |"
        )


if __name__ == "__main__":
    main()
