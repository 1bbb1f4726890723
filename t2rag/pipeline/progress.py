"""Progress of a run in one process: one line per stage call, kept for the run manifest."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

progress = logging.getLogger("t2rag.progress")


@dataclass
class StageLog:
    """Wall time and row counts per stage, printed as one line each and kept for the run manifest."""

    entries: list[dict] = field(default_factory=list)

    @contextmanager
    def stage(self, stage: str, rows: int, **labels: object):
        """Time the block; it may add labels to the yielded dict (they go into the line and the manifest)."""
        start = time.perf_counter()
        labels = dict(labels)
        yield labels
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
