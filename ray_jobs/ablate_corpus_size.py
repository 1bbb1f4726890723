"""Corpus-size ablation (the paper's Figure 4): MRR@3 as the corpus grows, per subset and method.

    python -m ray_jobs.ablate_corpus_size --config configs/retrieval.yaml [--fractions 0.2,0.4,...]

For every subset, fraction and seed a random share of the subset's contexts forms the corpus, and only questions
whose gold context is in it are asked. Cells run as parallel Ray tasks (one per subset and seed); passages and
questions are embedded once per subset (by the actor pool of build_index) and every cell reuses those vectors. Writes
`ablations/corpus_size_cells.csv` (one row per cell), `ablations/corpus_size.csv` (mean and standard deviation
of MRR@3 per fraction and method) and `ablations/corpus_size.png` (error bars) under the run's `out`.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time

import numpy as np

from ray_jobs.build_index import embed_corpus
from ray_jobs.common import init_ray
from t2rag.config import RunConfig, load_config
from t2rag.metrics.retrieval import gold_ranks, mrr_at_k
from t2rag.plots import plot_corpus_size
from t2rag.resources import Resources
from t2rag.retrieval import QueryBlock, build_retriever
from t2rag.storage import join, write_bytes

log = logging.getLogger("t2rag.progress")

DEFAULT_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)


def sample_corpus_positions(n_docs: int, fraction: float, seed: int) -> np.ndarray:
    """Sorted positions of a seeded random share of the corpus (at least one document)."""
    size = max(1, round(fraction * n_docs))
    return np.sort(np.random.default_rng(seed).choice(n_docs, size=size, replace=False))


def run_cells(
    config_json: str, subset: str, fractions: list[float], seed: int, methods: list[str], vectors, qvectors
) -> list[dict]:
    """MRR@3 of each method on the sampled corpus of every fraction for one seed (runs as a Ray task)."""
    config = RunConfig.model_validate_json(config_json)
    resources = Resources(config)
    corpus = resources.corpus(subset)
    rows = resources.questions.subset(subset).scored()
    all_questions = np.asarray(rows.column("question").to_pylist(), dtype=object)
    all_gold = np.asarray(rows.column("context_id").to_pylist(), dtype=object)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        retrieval = config.retrieval.model_copy(update={"index_uri": tmp})
        for fraction in fractions:
            keep = sample_corpus_positions(len(corpus), fraction, seed)
            sub = corpus.select(keep.tolist(), name=f"{subset}-f{fraction:g}-s{seed}")
            in_corpus = np.isin(all_gold, np.asarray(sub.context_ids))
            questions, gold = all_questions[in_corpus].tolist(), all_gold[in_corpus].tolist()
            for method in methods:
                retriever = build_retriever(method, retrieval)
                retriever.index(sub, vectors=vectors[keep])
                block = QueryBlock(questions, qvectors[in_corpus] if retriever.needs_query_vectors else None)
                hits = retriever.search(block, config.retrieval.k)
                ranks = gold_ranks(hits.context_ids(sub), gold)
                out.append(
                    {
                        "subset": subset,
                        "method": method,
                        "fraction": fraction,
                        "seed": seed,
                        "documents": len(sub),
                        "questions": len(questions),
                        "mrr@3": round(100 * mrr_at_k(ranks, 3), 4),
                    }
                )
    return out


def ablate_corpus_size(
    config: RunConfig,
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS,
    seeds: int = 5,
    methods: list[str] | None = None,
) -> dict[str, str]:
    """Run every cell in parallel and write the CSVs and the plot; returns their paths."""
    import pandas as pd
    import ray

    methods = methods or [m for m in config.methods if m in ("bm25", "base", "hybrid_bm25", "hybrid_rrf")]
    resources = Resources(config)
    config_json = config.model_dump_json()
    futures = []
    # One task per (subset, seed): each loads the questions once and walks the fractions.
    cells_task = ray.remote(num_cpus=1)(run_cells)
    for subset in resources.questions.subsets:
        corpus = resources.corpus(subset)
        start = time.perf_counter()
        vectors = embed_corpus(config, corpus)
        questions = resources.questions.subset(subset).scored()
        qvectors = resources.embedder.embed_queries(questions.column("question").to_pylist())
        log.info(
            "[ablation] %s: embedded %d passages and %d questions in %.1fs",
            subset,
            len(corpus),
            questions.num_rows,
            time.perf_counter() - start,
        )
        vref, qref = ray.put(vectors), ray.put(qvectors)
        for seed in range(seeds):
            futures.append(cells_task.remote(config_json, subset, list(fractions), seed, methods, vref, qref))
    cells = pd.DataFrame([row for rows in ray.get(futures) for row in rows])
    table = (
        cells.groupby(["subset", "method", "fraction"], sort=True)
        .agg(
            mrr3_mean=("mrr@3", "mean"),
            mrr3_std=("mrr@3", "std"),
            documents=("documents", "mean"),
            questions=("questions", "mean"),
            seeds=("seed", "count"),
        )
        .reset_index()
    )
    paths = {
        "cells": join(config.out, "ablations", "corpus_size_cells.csv"),
        "table": join(config.out, "ablations", "corpus_size.csv"),
        "plot": join(config.out, "ablations", "corpus_size.png"),
    }
    _write_csv(cells, paths["cells"])
    _write_csv(table.round(4), paths["table"])
    write_bytes(paths["plot"], plot_corpus_size(table))
    return paths


def _write_csv(frame, path: str) -> None:
    write_bytes(path, frame.to_csv(index=False).encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--fractions", default=",".join(str(f) for f in DEFAULT_FRACTIONS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", default=None, help="comma-separated retrieval methods (default: the config's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = load_config(args.config)
    init_ray(config.ray)
    fractions = tuple(float(f) for f in args.fractions.split(","))
    methods = args.methods.split(",") if args.methods else None
    for name, path in ablate_corpus_size(config, fractions, args.seeds, methods).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
