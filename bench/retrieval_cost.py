"""Retrieval cost per question of each method against plain BM25, on the same corpus, and its peak memory.

    python bench/retrieval_cost.py                                   # the bundled dev sample, all-MiniLM-L6-v2
    python bench/retrieval_cost.py --distractors 10000 --embedder hashing --methods bm25,bm25_focus
    python bench/retrieval_cost.py --distractors 100000 --embedder hashing --methods bm25,bm25_focus --memory

Time: every retriever is indexed first (reusing cached tables; index time is not a per-question cost), then each
subset's questions are searched as one block, `--rounds` times, the methods taking turns in every round so that a
busy spell of the machine falls on all of them alike, each call with the garbage collector off
(`t2rag.progress.call_seconds`).
Reported per method: milliseconds per question for embedding the questions (dense methods; on a GPU actor pool
this is what a cluster pays per question), for the search itself, and both together (medians of the rounds), each
as a ratio to BM25's: the median over rounds of the ratio within the round, so that a slow round weighs on both
sides of its ratio.

Memory (`--memory`): each (method, subset) runs again in a fresh process that builds the corpus, resets the
kernel's peak-RSS mark, then indexes and searches: its peak resident memory above what the corpus alone held is the
method's, reported with its ratio to BM25's (the larger subset counts).

`--embedder hashing` replaces the model by the deterministic hashing embedder, for corpora too large to embed on a
CPU: its figures say what the search costs, not what a real model's embedding would. `--distractors N` adds N
synthetic contexts (resampled real tokens, no metadata) to every subset's corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from t2rag.data import build_corpora, load_questions
from t2rag.data.distractors import extend, synthetic_contexts
from t2rag.methods import get_method
from t2rag.progress import call_seconds, paired_ratio
from t2rag.retrieval import QueryBlock, RetrievalConfig, build_retriever
from t2rag.retrieval.dense.embedder import EmbedderConfig, make_embedder

METHODS = "bm25,bm25_numeric,bm25_meta,bm25_page,bm25_focus,chunked,hybrid_chunked,hybrid_meta"


def corpora_and_questions(data: str | None, distractors: int) -> tuple[dict, dict[str, list[str]]]:
    questions = load_questions(data)
    corpora = build_corpora(questions)
    if distractors:
        extra = synthetic_contexts(distractors)
        corpora = {name: extend(c, extra) for name, c in corpora.items()}
    asked = {s: questions.subset(s).scored().column("question").to_pylist() for s in corpora}
    return corpora, asked


def timings(args, methods: list[str]) -> dict:
    """Embedding and search seconds per method over every subset (medians of alternating rounds), and each
    method's ratios to BM25's: the median over rounds of the ratio within a round, the subsets summed."""
    corpora, asked = corpora_and_questions(args.data, args.distractors)
    index_uri = args.index_uri or (tempfile.mkdtemp() if args.distractors else None)
    config = RetrievalConfig(embedder=EmbedderConfig(model=args.embedder), index_uri=index_uri)
    embedder = make_embedder(config.embedder)
    rows: dict[str, dict] = {m: {"embed_s": 0.0, "search_s": 0.0} for m in methods}
    # Per method and round, the search seconds and the embedding seconds summed over the subsets.
    searched = {m: [0.0] * args.rounds for m in methods}
    embedded = {m: [0.0] * args.rounds for m in methods}
    for subset, corpus in corpora.items():
        texts = asked[subset]
        vectors, embed_runs = None, [0.0] * args.rounds
        blocks = {}
        for method in methods:
            retriever = build_retriever(get_method(method).retriever, config)
            retriever.index(corpus)
            if retriever.needs_query_vectors and vectors is None:  # embedded once per subset, for every dense method
                embedder.embed_queries(texts[:32])  # warm-up
                embed_runs = [call_seconds(lambda t=texts: embedder.embed_queries(t)) for _ in range(args.rounds)]
                vectors = embedder.embed_queries(texts)
            if retriever.needs_query_vectors:
                rows[method]["embed_s"] += statistics.median(embed_runs)
                embedded[method] = [a + b for a, b in zip(embedded[method], embed_runs, strict=True)]
            block = QueryBlock(texts, vectors if retriever.needs_query_vectors else None)
            retriever.search(QueryBlock(texts[:8], None if block.vectors is None else block.vectors[:8]), 3)
            blocks[method] = (retriever, block)
        runs: dict[str, list[float]] = {m: [] for m in methods}
        for _ in range(args.rounds):
            for method, (retriever, block) in blocks.items():
                runs[method].append(call_seconds(lambda r=retriever, b=block: r.search(b, 3)))
        for method in methods:
            rows[method]["search_s"] += statistics.median(runs[method])
            searched[method] = [a + b for a, b in zip(searched[method], runs[method], strict=True)]
        del blocks
    n_questions = sum(len(t) for t in asked.values())
    out = {"questions": n_questions, "documents": {s: len(c) for s, c in corpora.items()}, "methods": {}}
    for method, r in rows.items():
        total = r["embed_s"] + r["search_s"]
        entry = {
            "embed_ms": round(1000 * r["embed_s"] / n_questions, 3),
            "search_ms": round(1000 * r["search_s"] / n_questions, 3),
            "total_ms": round(1000 * total / n_questions, 3),
        }
        if "bm25" in rows:
            entry["search_vs_bm25"] = round(paired_ratio(searched[method], searched["bm25"]), 2)
            totals = [s + e for s, e in zip(searched[method], embedded[method], strict=True)]
            bm25_totals = [s + e for s, e in zip(searched["bm25"], embedded["bm25"], strict=True)]
            entry["total_vs_bm25"] = round(paired_ratio(totals, bm25_totals), 2)
        out["methods"][method] = entry
    return out


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))


def one_peak(args) -> dict:
    """In this process: the corpus of one subset, then one method's index and search; its peak above the corpus."""
    corpora, asked = corpora_and_questions(args.data, args.distractors)
    corpus, texts = corpora[args.subset], asked[args.subset]
    corpora = None
    index_uri = args.index_uri or tempfile.mkdtemp()
    config = RetrievalConfig(embedder=EmbedderConfig(model=args.embedder), index_uri=index_uri)
    retriever = build_retriever(get_method(args.peak_of).retriever, config)
    vectors = make_embedder(config.embedder).embed_queries(texts) if retriever.needs_query_vectors else None
    held = _rss_kb("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak RSS mark (VmHWM) restarts from here
    start = time.perf_counter()  # the collector stays on: a peak without it would not be the method's
    retriever.index(corpus)
    index_s = time.perf_counter() - start
    retriever.search(QueryBlock(texts, vectors), 3)
    peak = _rss_kb("VmHWM:")
    return {
        "held_mb": round(held / 1024, 1),
        "peak_above_mb": round((peak - held) / 1024, 1),
        "index_s": round(index_s, 1),
    }


def peaks(args, methods: list[str]) -> dict:
    """Each (method, subset) in a fresh process; per method the larger subset's peak above its corpus."""
    out: dict[str, dict] = {}
    for method in methods:
        for subset in ("FinQA", "TAT-DQA"):
            command = [sys.executable, __file__, "--peak-of", method, "--subset", subset, "--embedder", args.embedder,
                       "--distractors", str(args.distractors)]  # fmt: skip
            if args.data:
                command += ["--data", args.data]
            done = subprocess.run(command, capture_output=True, text=True, check=True, env=dict(os.environ))
            cell = json.loads(done.stdout.strip().splitlines()[-1])
            if method not in out or cell["peak_above_mb"] > out[method]["peak_above_mb"]:
                out[method] = {**cell, "subset": subset}
    base = out.get("bm25")
    for cell in out.values():
        if base:
            cell["peak_vs_bm25"] = round(cell["peak_above_mb"] / max(base["peak_above_mb"], 1e-9), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None)
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--distractors", type=int, default=0, help="synthetic contexts added to every corpus")
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2")
    parser.add_argument("--index-uri", default=None, help="LanceDB location (default: the t2rag cache)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed rounds; the median counts")
    parser.add_argument("--memory", action="store_true", help="also each method's peak memory, in fresh processes")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--peak-of", default=None, help=argparse.SUPPRESS)  # the child of --memory
    parser.add_argument("--subset", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peak_of:
        print(json.dumps(one_peak(args)))
        return
    methods = args.methods.split(",")
    out = timings(args, methods)
    out["embedder"], out["rounds"] = args.embedder, args.rounds
    if args.memory:
        out["peak_memory"] = peaks(args, methods)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['questions']} questions, documents per subset {out['documents']}, embedder {args.embedder}, "
          f"medians of {args.rounds} alternating rounds, ratios paired within a round")  # fmt: skip
    print(f"{'method':16} {'embed ms/q':>11} {'search ms/q':>12} {'total ms/q':>11} {'search/bm25':>12} total/bm25")
    for method, e in out["methods"].items():
        print(
            f"{method:16} {e['embed_ms']:11.3f} {e['search_ms']:12.3f} {e['total_ms']:11.3f} "
            f"{e.get('search_vs_bm25', float('nan')):12.2f} {e.get('total_vs_bm25', float('nan')):11.2f}"
        )
    for method, cell in out.get("peak_memory", {}).items():
        ratio = f", {cell['peak_vs_bm25']}x BM25's" if "peak_vs_bm25" in cell else ""
        print(f"{method:16} peak above the corpus {cell['peak_above_mb']:,.0f} MB ({cell['subset']}, "
              f"index {cell['index_s']} s){ratio}")  # fmt: skip


if __name__ == "__main__":
    main()
