"""Corpus-size ablation (the paper's Figure 4, walked downward and upward): MRR@3 as the corpus grows.

    python -m ray_jobs.ablate_corpus_size --config FILE [--fractions 0.2,0.4,...]          # down, as in the paper
    python -m ray_jobs.ablate_corpus_size --config FILE --sizes 300,1000,10000,100000 --distractors synthetic

Downward, a seeded random share of each subset's contexts forms the corpus and only questions whose gold context is
in it are asked. Upward (`--sizes` above a subset's own corpus), the corpus is all of the subset's contexts followed
by distractors, and every question is asked: the distractors are another source in the same layout
(`--distractors DIR|s3://...`) or `synthetic` (timing-only contexts of resampled real tokens, searched by dense
methods through the deterministic hashing embedder). For a seed, the distractors of a size are a prefix of one
seeded order of the pool, so each seed's corpora grow by adding documents.

One Ray task per (subset, seed) walks the sizes; it builds each corpus's index once per method and reuses the
passage and question vectors embedded once on the driver. Cells are written to `ablations/corpus_size_cells.csv`
as tasks finish, and a rerun skips the (subset, seed) tasks whose cells are all there. Outputs under the run's
`out`: the cells (MRR@3, index seconds, search seconds, queries/s, peak memory of the task), the mean and standard
deviation per size (`corpus_size.csv`), the plot on a log axis (`corpus_size.png`). A synthetic run writes
`corpus_size_synthetic*` instead, with a `synthetic` column, so its numbers never reach a quality table.
"""

from __future__ import annotations

import argparse
import logging
import resource
import tempfile
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from ray_jobs.build_index import embed_corpus
from ray_jobs.durable import start_job
from t2rag.config import RunConfig
from t2rag.data.corpus import Corpus
from t2rag.data.distractors import extend, load_distractors, synthetic_contexts
from t2rag.methods import get_method
from t2rag.metrics.retrieval import gold_ranks, mrr_at_k, recall_at_k
from t2rag.resources import Resources
from t2rag.results.plots import plot_corpus_size
from t2rag.retrieval import QueryBlock, build_retriever
from t2rag.retrieval.base import result_depth
from t2rag.retrieval.dense.hashing_embedder import HASHING_MODEL
from t2rag.retrieval.fusion.sharded import CorpusFacts, ShardFacts, index_shard, merge_candidates, shard_candidates
from t2rag.retrieval.fusion.weighted import FusedRetriever
from t2rag.retrieval.lexical.bm25 import BM25Retriever
from t2rag.retrieval.lexical.bm25_matrix import BM25Statistics
from t2rag.retrieval.shards import merge_hits, offset_hits, shard_ranges
from t2rag.storage import join, read_bytes, write_bytes

log = logging.getLogger("t2rag.progress")

DEFAULT_FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0)
SYNTHETIC = "synthetic"
#: A task's memory: a base for the process, plus per document of its largest corpus (text, the BM25 build's peak,
#: vectors); docs/performance.md has what tasks measured.
TASK_MEMORY = 1 << 30
MEMORY_PER_DOCUMENT = 40 * 1024
RETRIEVAL_METHODS = ("bm25", "base", "hybrid_bm25", "hybrid_rrf")
#: Documents a shard of a sharded cell holds at most: a task then reserves about 6 GiB.
SHARD_DOCS = 125_000


def sample_corpus_positions(n_docs: int, fraction: float, seed: int) -> np.ndarray:
    """Sorted positions of a seeded random share of the corpus (at least one document)."""
    size = max(1, round(fraction * n_docs))
    return np.sort(np.random.default_rng(seed).choice(n_docs, size=size, replace=False))


def cell_corpus(own: Corpus, size: int, seed: int, pool: Corpus | None) -> tuple[Corpus, np.ndarray, np.ndarray]:
    """The corpus of one size: a seeded sample of the subset's own contexts, or all of them and the first
    `size - len(own)` distractors of the seed's order of the pool (synthetic ones when `pool` is None: the seed's
    first contexts, made here). Returns it with the positions of its own contexts and of its distractors."""
    if size <= len(own):
        keep = sample_corpus_positions(len(own), size / len(own), seed)
        return own.select(keep.tolist(), f"{own.name}-n{size}-s{seed}"), keep, np.zeros(0, np.int64)
    if pool is None:
        corpus = cell_part(own, seed, range(0, size))
        return replace(corpus, name=f"{own.name}-n{size}-s{seed}"), np.arange(len(own)), np.arange(size - len(own))
    order = np.random.default_rng(seed).permutation(len(pool))[: size - len(own)]
    corpus = extend(own, pool.select(order.tolist()))
    if len(corpus) < size:  # the pool repeats some of the subset's own contexts
        raise ValueError(f"size {size}: {own.name} and its distractors hold only {len(corpus)} contexts")
    return replace(corpus, name=f"{own.name}-n{size}-s{seed}"), np.arange(len(own)), order


def cell_part(own: Corpus, seed: int, docs: range) -> Corpus:
    """The documents `docs` of a synthetic cell's corpus (the subset's own contexts, then the seed's synthetic ones),
    made without the rest of it."""
    mine = own.select(list(range(docs.start, min(docs.stop, len(own)))))
    first = max(docs.start - len(own), 0)
    theirs = synthetic_contexts(max(docs.stop - len(own) - first, 0), seed, first)
    return replace(extend(mine, theirs), name=f"{own.name}[{docs.start}:{docs.stop}]-s{seed}")


def run_cells(
    config_json: str,
    subset: str,
    sizes: list[int],
    seed: int,
    methods: list[str],
    vectors: np.ndarray,
    qvectors: np.ndarray | None,
    pool: Corpus | None,
    pool_vectors: np.ndarray | None,
    per_question: bool = False,
) -> list[dict]:
    """Every size and method of one (subset, seed), as one Ray task; with `per_question`, each row also lists the
    questions' gold context ids (`gold`) and the gold's rank per question (`ranks`, 0: not in the top k)."""
    config = RunConfig.model_validate_json(config_json)
    resources = Resources(config)
    own = resources.corpus(subset)
    rows = resources.questions.subset(subset).scored()
    all_questions = np.asarray(rows.column("question").to_pylist(), dtype=object)
    all_gold = np.asarray(rows.column("context_id").to_pylist(), dtype=object)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        retrieval = config.retrieval.model_copy(update={"index_uri": tmp})
        for size in sizes:
            corpus, mine, theirs = cell_corpus(own, size, seed, pool)
            if len(theirs) and pool is None:  # synthetic: embedded here (the hashing embedder), for dense methods
                made = list(corpus.texts[len(mine) :])
                dense = vectors.shape[1] > 0
                pool_vectors = resources.embedder.embed_passages(made) if dense else np.zeros((len(made), 0))
            cell_vectors = np.concatenate([vectors[mine], pool_vectors[theirs]]) if len(theirs) else vectors[mine]
            in_corpus = np.isin(all_gold, np.asarray(corpus.context_ids[: len(mine)]))
            questions, gold = all_questions[in_corpus].tolist(), all_gold[in_corpus].tolist()
            for method in methods:
                retriever = build_retriever(get_method(method).retriever, retrieval, config.settings)
                start = time.perf_counter()
                retriever.index(corpus, vectors=cell_vectors)
                indexed = time.perf_counter()
                block = QueryBlock(questions, qvectors[in_corpus] if retriever.needs_query_vectors else None)
                hits = retriever.search(block, config.retrieval.k)
                searched = time.perf_counter()
                ranks = gold_ranks(hits.context_ids(corpus), gold)
                cell = Cell(subset, method, size, seed, len(corpus), len(theirs))
                row = cell_row(cell, ranks, indexed - start, searched - indexed, _peak_mb(), searched - start)
                out.append({**row, "gold": gold, "ranks": ranks.tolist()} if per_question else row)
                del retriever
    return out


def sharded_cell(config: RunConfig, subset: str, size: int, seed: int, method: str, shard_docs: int) -> dict:
    """One synthetic cell searched in shards of at most `shard_docs` documents, one Ray task each (made in the task,
    in a fresh worker so its peak memory is its own): the shards' statistics first, then each shard indexed with the
    corpus's and searched, merged exactly (`t2rag.retrieval.shards`, `t2rag.retrieval.fusion.sharded`). BM25 and the
    fused retrievers without a dense component shard."""
    import ray

    ranges = shard_ranges(size, -(-size // shard_docs))
    options = {"num_cpus": 1, "memory": TASK_MEMORY + MEMORY_PER_DOCUMENT * max(len(r) for r in ranges), "max_calls": 1}
    args = (config.model_dump_json(), subset, seed, method)
    start = time.perf_counter()
    made = ray.get([ray.remote(**options)(shard_facts).remote(*args, r) for r in ranges])
    retriever = build_retriever(get_method(method).retriever, config.retrieval, config.settings)
    parts = [facts for facts, _ in made]
    facts = CorpusFacts.merge(parts) if isinstance(retriever, FusedRetriever) else BM25Statistics.merge(parts)
    facts_ref = ray.put(facts)
    searched = ray.get([ray.remote(**options)(shard_search).remote(*args, r, facts_ref) for r in ranges])
    resources = Resources(config)
    own = resources.corpus(subset)
    rows = resources.questions.subset(subset).scored()
    k = config.retrieval.k
    if isinstance(retriever, FusedRetriever):
        hits, certified = merge_candidates(retriever, [s["found"] for s in searched], k, contained=facts.contained)
    else:
        hits, certified = merge_hits([s["found"] for s in searched], result_depth(k)), np.ones(len(rows), bool)
    ids = np.asarray([*own.context_ids, SYNTHETIC], dtype=object)
    found = [ids[np.minimum(row[row >= 0], len(own))].tolist() for row in hits.indices]
    ranks = gold_ranks(found, rows.column("context_id").to_pylist())
    search_s = sum(s["search_s"] for s in searched)
    peak = max([peak for _, peak in made] + [s["peak_mb"] for s in searched])
    index_s = sum(s["index_s"] for s in searched)
    cell = Cell(subset, method, size, seed, documents=size, distractors=size - len(own))
    return cell_row(cell, ranks, index_s, search_s, peak, time.perf_counter() - start, len(ranges), (~certified).sum())


@dataclass(frozen=True)
class Cell:
    """What one cell of the ablation searched: a subset's questions by a method in a corpus of `documents` (`size`
    asked for, `distractors` of them added), the seed's draw."""

    subset: str
    method: str
    size: int
    seed: int
    documents: int
    distractors: int


def cell_row(
    cell: Cell,
    ranks: np.ndarray,
    index_s: float,
    search_s: float,
    peak_mb: float,
    wall_s: float,
    shards: int = 1,
    uncertified: int = 0,
) -> dict:
    """The row of one cell: `ranks` the gold's rank per question asked (index and search seconds summed over
    shards)."""
    return {
        **asdict(cell),
        "questions": len(ranks),
        "mrr@3": round(100 * mrr_at_k(ranks, 3), 4),
        "recall@1": round(100 * recall_at_k(ranks, 1), 4),
        "index_s": round(index_s, 3),
        "search_s": round(search_s, 3),
        "queries_per_s": round(len(ranks) / max(search_s, 1e-9), 1),
        "task_peak_rss_mb": peak_mb,
        "shards": shards,
        "uncertified": int(uncertified),
        "wall_s": round(wall_s, 1),
    }


def shard_facts(config_json: str, subset: str, seed: int, method: str, docs: range):
    """What the documents `docs` of a synthetic cell contribute to its corpus's statistics, and the task's peak."""
    config = RunConfig.model_validate_json(config_json)
    part = cell_part(Resources(config).corpus(subset), seed, docs)
    retriever = _shardable(method, config)
    facts = ShardFacts.of(retriever, part) if isinstance(retriever, FusedRetriever) else retriever.statistics(part)
    return facts, _peak_mb()


def shard_search(config_json: str, subset: str, seed: int, method: str, docs: range, facts) -> dict:
    """The documents `docs` of a synthetic cell indexed with the corpus's statistics and searched by every question
    of the subset: the fused candidates or the top hits, corpus-wide positions."""
    config = RunConfig.model_validate_json(config_json)
    resources = Resources(config)
    part = cell_part(resources.corpus(subset), seed, docs)
    questions = resources.questions.subset(subset).scored().column("question").to_pylist()
    retriever = _shardable(method, config)
    start = time.perf_counter()
    if isinstance(retriever, FusedRetriever):
        index_shard(retriever, part, docs, facts)
    else:
        retriever.index_part(part, facts)
    indexed = time.perf_counter()
    if isinstance(retriever, FusedRetriever):
        found = shard_candidates(retriever, questions, 2 * retriever.candidates, docs.start)
    else:
        found = offset_hits(retriever.search(questions, config.retrieval.k), docs.start)
    searched = time.perf_counter()
    return {"found": found, "index_s": indexed - start, "search_s": searched - indexed, "peak_mb": _peak_mb()}


def _shardable(method: str, config: RunConfig):
    retriever = build_retriever(get_method(method).retriever, config.retrieval, config.settings)
    if not isinstance(retriever, FusedRetriever | BM25Retriever):
        raise ValueError(f"a sharded cell searches bm25 or a fused retriever without a dense component, not {method}")
    return retriever


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def ablation_config(config: RunConfig, distractors: str | None) -> RunConfig:
    """A synthetic ablation embeds with the hashing embedder: the real model would take hours on synthetic text
    that means nothing, and its vectors must match the distractors'."""
    if distractors != SYNTHETIC:
        return config
    embedder = config.retrieval.embedder.model_copy(update={"model": HASHING_MODEL})
    return config.model_copy(update={"retrieval": config.retrieval.model_copy(update={"embedder": embedder})})


def ablate_corpus_size(
    config: RunConfig,
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS,
    seeds: int = 5,
    methods: list[str] | None = None,
    sizes: tuple[int, ...] | None = None,
    distractors: str | None = None,
    shard_docs: int = SHARD_DOCS,
) -> dict[str, str]:
    """Run every (subset, seed) task, write the cells as they finish, then the table and the plot; returns their
    paths. `sizes` (document counts) replaces `fractions` of each subset's corpus; a synthetic cell of more than
    `shard_docs` documents is searched in shards (`sharded_cell`)."""
    import pandas as pd
    import ray

    config = ablation_config(config, distractors)
    synthetic = distractors == SYNTHETIC
    methods = methods or [m for m in config.methods if m in RETRIEVAL_METHODS]
    resources = Resources(config)
    stem = "corpus_size_synthetic" if synthetic else "corpus_size"
    paths = {name: join(config.out, "ablations", f"{stem}{suffix}") for name, suffix in PATHS.items()}
    done = _read_cells(paths["cells"])
    wanted = {subset: _sizes(len(resources.corpus(subset)), sizes, fractions) for subset in resources.corpora}
    whole = {subset: [s for s in ss if s <= shard_docs] for subset, ss in wanted.items()}
    sharded = {subset: [s for s in ss if s > shard_docs] for subset, ss in wanted.items()}
    if any(sharded.values()) and not synthetic:
        raise ValueError(f"sizes above --shard-docs {shard_docs} are sharded, which only synthetic distractors are")
    pool = pool_vectors = None
    most = max((s - len(resources.corpus(sub)) for sub, ss in whole.items() for s in ss), default=0)
    if most > 0 and not synthetic:  # synthetic distractors are made in the tasks
        pool = load_distractors(_required(distractors))
        pool_vectors = _embed(config, resources, pool, methods)
    pool_ref, pool_vectors_ref = ray.put(pool), ray.put(pool_vectors)
    # Ray schedules the tasks by the memory their largest corpus needs, so a node runs only as many as it holds.
    largest = max((max(ss) for ss in whole.values() if ss), default=0)
    cells_task = ray.remote(num_cpus=1, memory=TASK_MEMORY + MEMORY_PER_DOCUMENT * largest)(run_cells)
    futures = []
    for subset in resources.questions.subsets:
        todo = [s for s in range(seeds) if whole[subset] and not _complete(done, subset, s, whole[subset], methods)]
        if not todo:
            continue
        corpus = resources.corpus(subset)
        questions = resources.questions.subset(subset).scored().column("question").to_pylist()
        start = time.perf_counter()
        vectors = ray.put(_embed(config, resources, corpus, methods))
        qvectors = ray.put(resources.embedder.embed_queries(questions) if _dense(methods) else None)
        seconds = time.perf_counter() - start
        log.info(
            "[ablation] %s: %d passages, %d questions embedded in %.1fs", subset, len(corpus), len(questions), seconds
        )
        for seed in todo:
            args = (config.model_dump_json(), subset, whole[subset], seed, methods)
            futures.append(cells_task.remote(*args, vectors, qvectors, pool_ref, pool_vectors_ref))
    cells = done

    def add(rows: list[dict]) -> None:
        nonlocal cells
        cells = pd.concat([cells, pd.DataFrame(rows)], ignore_index=True)
        _write_csv(cells.assign(synthetic=synthetic) if synthetic else cells, paths["cells"])

    while futures:
        ready, futures = ray.wait(futures, num_returns=1)
        add(ray.get(ready[0]))
        log.info("[ablation] %d cells written, %d tasks left", len(cells), len(futures))
    for subset in resources.questions.subsets:
        for seed in range(seeds):
            for size in sharded[subset]:
                for method in methods:
                    if not _complete(done, subset, seed, [size], [method]):
                        add([sharded_cell(config, subset, size, seed, method, shard_docs)])
                        log.info("[ablation] %s, %s, %d documents, seed %d: written", subset, method, size, seed)
    table = _aggregate(cells)
    _write_csv(table.assign(synthetic=synthetic) if synthetic else table, paths["table"])
    write_bytes(paths["plot"], plot_corpus_size(table, synthetic=synthetic))
    return paths


PATHS = {"cells": "_cells.csv", "table": ".csv", "plot": ".png"}


def _sizes(own: int, sizes: tuple[int, ...] | None, fractions: tuple[float, ...]) -> list[int]:
    if sizes:
        return sorted(set(sizes))
    return sorted({max(1, round(f * own)) for f in fractions})


def _required(distractors: str | None) -> str:
    if not distractors:
        raise ValueError("sizes above a subset's corpus need distractors (a source, or 'synthetic')")
    return distractors


def _dense(methods: list[str]) -> bool:
    return any(get_method(m).searches_vectors for m in methods)


def _embed(config: RunConfig, resources: Resources, corpus: Corpus, methods: list[str]):
    """Passage vectors for the dense methods (the Ray embedding pool, or the hashing embedder in this process)."""
    if not _dense(methods):
        return np.zeros((len(corpus), 0), np.float32)
    if config.retrieval.embedder.model == HASHING_MODEL:
        return resources.embedder.embed_passages(list(corpus.texts))
    return embed_corpus(config, corpus)


def _read_cells(path: str):
    import io

    import pandas as pd

    data = read_bytes(path)
    return pd.read_csv(io.BytesIO(data)) if data else pd.DataFrame()


def _complete(done, subset: str, seed: int, sizes: list[int], methods: list[str]) -> bool:
    if done.empty:
        return False
    mine = done[(done["subset"] == subset) & (done["seed"] == seed)]
    return {(s, m) for s in sizes for m in methods} <= set(zip(mine["size"], mine["method"], strict=True))


def _aggregate(cells):
    """Mean and standard deviation of MRR@3 per (subset, method, size), mean Recall@1, with time and memory."""
    if "recall@1" not in cells:  # cells written before Recall@1 was recorded
        cells = cells.assign(**{"recall@1": float("nan")})
    if "uncertified" not in cells:  # and before cells were sharded
        cells = cells.assign(shards=1, uncertified=0)
    return (
        cells.groupby(["subset", "method", "size"], sort=True)
        .agg(
            mrr3_mean=("mrr@3", "mean"),
            mrr3_std=("mrr@3", "std"),
            recall1_mean=("recall@1", "mean"),
            documents=("documents", "mean"),
            questions=("questions", "mean"),
            index_s=("index_s", "mean"),
            queries_per_s=("queries_per_s", "mean"),
            task_peak_rss_mb=("task_peak_rss_mb", "max"),
            shards=("shards", "max"),
            uncertified=("uncertified", "sum"),
            seeds=("seed", "count"),
        )
        .reset_index()
        .round(4)
    )


def _write_csv(frame, path: str) -> None:
    write_bytes(path, frame.to_csv(index=False).encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--fractions", default=",".join(str(f) for f in DEFAULT_FRACTIONS))
    parser.add_argument("--sizes", default=None, help="comma-separated corpus sizes (documents); replaces fractions")
    parser.add_argument("--distractors", default=None, help="a source in the same layout, or 'synthetic'")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", default=None, help="comma-separated retrieval methods (default: the config's)")
    parser.add_argument(
        "--shard-docs", type=int, default=SHARD_DOCS, help="a synthetic cell above this many documents is sharded"
    )
    args = parser.parse_args(argv)
    config = start_job(args.config)
    fractions = tuple(float(f) for f in args.fractions.split(","))
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else None
    methods = args.methods.split(",") if args.methods else None
    paths = ablate_corpus_size(config, fractions, args.seeds, methods, sizes, args.distractors, args.shard_docs)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
