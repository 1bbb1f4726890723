"""Step functions shared by every runner (single-process, Ray Data, Ray Serve): pure, batch-first."""

from __future__ import annotations

import logging
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.data.corpus import Corpus
from t2rag.metrics.retrieval import gold_ranks
from t2rag.retrieval.base import Hits

progress = logging.getLogger("t2rag.progress")


def sample_questions(table: pa.Table, n: int | None, seed: int) -> pa.Table:
    """A seeded sample of n rows per subset, kept in data order; the same seed always picks the same ids."""
    if n is None:
        return table
    parts = []
    for subset in dict.fromkeys(table.column("subset").to_pylist()):
        part = table.filter(pc.equal(table.column("subset"), subset))
        if part.num_rows <= n:
            parts.append(part)
            continue
        rng = np.random.default_rng([seed, zlib.crc32(subset.encode())])
        # Rank ids by a seeded permutation of their sorted order, so the sample does not depend on file order.
        ids = np.asarray(part.column("id").to_pylist(), dtype=object)
        order = np.argsort(ids, kind="stable")
        chosen = np.sort(order[rng.permutation(len(ids))[:n]])
        parts.append(part.take(pa.array(chosen)))
    return pa.concat_tables(parts) if parts else table.slice(0, 0)


def retrieval_columns(hits: Hits, corpus: Corpus, gold_context_ids: list[str]) -> dict[str, list]:
    """Record columns for a block of searches: ranked ids, scores and the gold rank."""
    ids = hits.context_ids(corpus)
    return {
        "context_ids": ids,
        "scores": hits.score_lists(),
        "gold_rank": gold_ranks(ids, gold_context_ids).astype(np.int32).tolist(),
    }


@dataclass
class StageLog:
    """Wall time and row counts per stage, printed as one line each and kept for the run manifest."""

    entries: list[dict] = field(default_factory=list)

    @contextmanager
    def stage(self, stage: str, rows: int, **labels: str):
        start = time.perf_counter()
        yield
        seconds = time.perf_counter() - start
        entry = {"stage": stage, "rows": rows, "seconds": round(seconds, 3), **labels}
        self.entries.append(entry)
        rate = rows / seconds if seconds > 0 else float("inf")
        tags = " ".join(f"{k}={v}" for k, v in labels.items())
        progress.info("[%s] %s rows=%d %.1fs (%.0f rows/s)", stage, tags, rows, seconds, rate)

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.entries:
            out[e["stage"]] = round(out.get(e["stage"], 0.0) + e["seconds"], 3)
        return out
