"""Progress of a run in one process: a bar (terminal) or periodic lines (log) per piece of work, and one timed
entry per stage call, kept for the run manifest."""

from __future__ import annotations

import gc
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

progress = logging.getLogger("t2rag.progress")

#: Stages that run once per run (or per corpus) and take long enough to be worth a line of their own; the
#: per-block stage lines are debug output, the work's progress speaks for them.
ONCE_STAGES = frozenset({"load", "index", "score"})


def format_rate(rows: float, seconds: float, unit: str = "rows") -> str:
    """A rate with sensible precision: `1234 rows/s`, `12.3 rows/s`, `0.42 rows/s` or `25.1 s/row`."""
    if seconds <= 0 or rows <= 0:
        return f"– {unit}/s"
    rate = rows / seconds
    if rate >= 100:
        return f"{rate:.0f} {unit}/s"
    if rate >= 10:
        return f"{rate:.1f} {unit}/s"
    if rate >= 1:
        return f"{rate:.2f} {unit}/s"
    return f"{seconds / rows:.1f} s/{unit.rstrip('s')}"


def format_seconds(seconds: float) -> str:
    """`42 s`, `3 min 05 s` or `1 h 02 min`."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


@dataclass
class StageLog:
    """Wall time and row counts per stage call, kept for the run manifest (and printed at debug level, or at info
    for the once-per-run stages)."""

    entries: list[dict] = field(default_factory=list)

    @contextmanager
    def stage(self, stage: str, rows: int, **labels: object):
        """Time the block; it may add labels to the yielded dict (they go into the line and the manifest), and
        set `rows` there when the count is known only at the end."""
        start = time.perf_counter()
        labels = dict(labels)
        yield labels
        self.record(stage, int(labels.pop("rows", rows)), time.perf_counter() - start, **labels)

    def record(self, stage: str, rows: int, seconds: float, **labels: object) -> None:
        """One timed stage call: kept for the manifest and logged."""
        entry = {"stage": stage, "rows": rows, "seconds": round(seconds, 3), **labels}
        self.entries.append(entry)
        tags = "".join(f" {k}={v}" for k, v in labels.items())
        level = logging.INFO if stage in ONCE_STAGES else logging.DEBUG
        progress.log(level, "[%s]%s rows=%d %.1fs (%s)", stage, tags, rows, seconds, format_rate(rows, seconds))

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.entries:
            out[e["stage"]] = round(out.get(e["stage"], 0.0) + e["seconds"], 3)
        return out


class Progress:
    """Progress through `total` rows of one piece of work: a bar on a terminal, else a log line at most every
    `every_s` seconds and at the end, each with the count, the rate and the time left."""

    def __init__(self, label: str, total: int, every_s: float = 15.0, bar: bool | None = None):
        self.label, self.total, self.every_s = label, total, every_s
        self.done = 0
        self.started = self._last = time.perf_counter()
        if bar is None:
            bar = sys.stderr.isatty() and progress.isEnabledFor(logging.INFO)
        self._bar = None
        if bar:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit="row", file=sys.stderr, dynamic_ncols=True)

    def advance(self, rows: int) -> None:
        self.done += rows
        if self._bar is not None:
            self._bar.update(rows)
            if self.done >= self.total:
                self._bar.close()
            return
        now = time.perf_counter()
        if self.done >= self.total or now - self._last >= self.every_s:
            self._last = now
            progress.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        """`[label] 8/16 rows (50%), 0.27 rows/s, 30 s left` (`done in 1 min 02 s` at the end)."""
        elapsed = (time.perf_counter() if now is None else now) - self.started
        share = f"{100 * self.done / self.total:.0f}%" if self.total else "100%"
        head = f"[{self.label}] {self.done}/{self.total} rows ({share}), {format_rate(self.done, elapsed)}"
        if self.done >= self.total:
            return f"{head}, done in {format_seconds(elapsed)}"
        if not self.done:
            return head
        return f"{head}, {format_seconds(elapsed / self.done * (self.total - self.done))} left"


def call_seconds(call: Callable[[], object]) -> float:
    """Wall-clock seconds `call()` takes, timed as `timeit` times: the collector run first and off while it runs (a
    collection's pause grows with every object the process holds, not with the call timed)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start
    finally:
        gc.enable()


def paired_ratio(seconds_of: Sequence[float], base: Sequence[float]) -> float:
    """The median over timed rounds of one round's seconds over the base's in the same round: a slow spell of the
    machine lasting a round weighs on both sides of its ratio (medians taken apart moved by 10-20% between runs)."""
    return statistics.median(a / b for a, b in zip(seconds_of, base, strict=True))
