"""Pages of one report that another page of it holds whole, and the ranking rule that prefers the page that holds
nothing more than what the question asks about.

A report's contexts overlap: TAT-DQA has pages that are a prefix of a longer one (the same table, then more
tables), and pages printed twice. Where a question's line items are in the shared part, BM25 favours the longer
page, which repeats them; the page the question was written from is the shorter one. So: a page is *held* by
another page of its report when at least `CONTAINED` of its runs of six words are in the other and not the other way
round. In a ranking, a held page that its holder outranks within the first `depth` results moves above it when
the holder's extra text adds none of the question's page evidence (each page-evidence component of the holder at
most the held page's): the holder then leads by BM25 alone. Nothing here reads the question's row.

Only pages with a report (a company name and year in the corpus's metadata) are compared, each with the pages of
its own report, so the cost grows with the reports' sizes, not the corpus's; a shard of a corpus gathers its pages'
runs (`ReportPages`) and the whole corpus's holders are found once (`ContainedPages.of_pages`).
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: The share of a page's runs of six words that its holder must have.
CONTAINED = 0.9
#: Words in a run.
RUN = 6
#: Results per question within which a held page may move above its holder.
DEPTH = 3

_TOKEN = re.compile(r"[a-z0-9]+")


def word_runs(text: str) -> np.ndarray:
    """A text's distinct runs of RUN consecutive words (lowercased letters and digits), as sorted 32-bit hashes."""
    words = _TOKEN.findall(text.lower())
    runs = (" ".join(words[i : i + RUN]).encode() for i in range(len(words) - RUN + 1))
    return np.unique(np.fromiter((zlib.crc32(r) for r in runs), np.uint32))


@dataclass(frozen=True)
class ReportPages:
    """The pages of a corpus, or of consecutive documents of one (a shard), that belong to a report: each one's
    position, report and runs of words, and how many documents the part holds."""

    positions: tuple[int, ...]
    reports: tuple[tuple[str, str], ...]
    runs: tuple[np.ndarray, ...]
    documents: int

    @classmethod
    def of(cls, texts: Sequence[str], names: Sequence[str | None], years: Sequence[str | None]) -> ReportPages:
        """The pages with a company name and a year."""
        kept = [i for i, (n, y) in enumerate(zip(names, years, strict=True)) if n and y]
        reports = tuple((names[i], years[i]) for i in kept)
        return cls(tuple(kept), reports, tuple(word_runs(texts[i]) for i in kept), len(texts))

    @classmethod
    def joined(cls, parts: Sequence[ReportPages]) -> ReportPages:
        """The pages of consecutive parts of one corpus, in corpus order, at their corpus positions."""
        starts = np.cumsum([0] + [p.documents for p in parts])
        positions = tuple(int(start) + i for p, start in zip(parts, starts, strict=False) for i in p.positions)
        reports = tuple(itertools.chain.from_iterable(p.reports for p in parts))
        runs = tuple(itertools.chain.from_iterable(p.runs for p in parts))
        return cls(positions, reports, runs, int(starts[-1]))


class ContainedPages:
    """Which page holds which, over a corpus's positions."""

    def __init__(self, pairs: np.ndarray):
        """`pairs`: (n x 2) int64 rows (holder, held)."""
        self.keys = np.unique(pairs[:, 0] * (1 << 32) + pairs[:, 1]) if len(pairs) else np.zeros(0, np.int64)

    @classmethod
    def of_pages(cls, pages: ReportPages) -> ContainedPages:
        """Compare every two pages of each report."""
        by_report: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, report in enumerate(pages.reports):
            by_report[report].append(i)
        pairs = []
        for members in by_report.values():
            for a, b in itertools.combinations(members, 2):
                runs_a, runs_b = pages.runs[a], pages.runs[b]
                shared = len(np.intersect1d(runs_a, runs_b, assume_unique=True))
                a_in_b = shared >= CONTAINED * max(len(runs_a), 1)
                b_in_a = shared >= CONTAINED * max(len(runs_b), 1)
                if a_in_b != b_in_a:
                    holder, held = (b, a) if a_in_b else (a, b)
                    pairs.append((pages.positions[holder], pages.positions[held]))
        return cls(np.array(pairs, np.int64).reshape(-1, 2))

    @classmethod
    def of(cls, texts: Sequence[str], names: Sequence[str | None], years: Sequence[str | None]) -> ContainedPages:
        return cls.of_pages(ReportPages.of(texts, names, years))

    def holds(self, holder: np.ndarray, held: np.ndarray) -> np.ndarray:
        """Whether each `holder` position holds the `held` position beside it (same shapes; -1: no page)."""
        if not len(self.keys):
            return np.zeros(np.shape(holder), bool)
        key = np.asarray(holder, np.int64) * (1 << 32) + np.asarray(held, np.int64)
        at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        return (self.keys[at] == key) & (np.asarray(holder) >= 0) & (np.asarray(held) >= 0)

    def prefer_held(
        self, positions: np.ndarray, scores: np.ndarray, evidence: Callable[[int], np.ndarray], depth: int = DEPTH
    ) -> tuple[np.ndarray, np.ndarray]:
        """A ranking (questions x results: corpus positions, best first, and their scores) with each held page that
        its holder outranks within the first `depth` moved above the holder, where no page-evidence component of
        the holder exceeds the held page's. A moved page is raised to its holder's score, so scores stay in order.
        `evidence(row)` gives the page-evidence components of a question's first `depth` results, as a
        (components x depth) array; it is asked only for questions whose first results hold one another."""
        depth = min(depth, positions.shape[1])
        pairs = [(hi, lo) for hi in range(depth) for lo in range(hi + 1, depth)]
        if not len(self.keys) or not pairs:
            return positions, scores
        flagged = np.zeros(len(positions), bool)
        for hi, lo in pairs:
            flagged |= self.holds(positions[:, hi], positions[:, lo])
        if not flagged.any():
            return positions, scores
        positions, scores = positions.copy(), scores.copy()
        for row in np.flatnonzero(flagged):
            parts = evidence(int(row))
            order = list(range(depth))  # the result (column) at each rank
            for _ in range(len(pairs)):  # a page never moves back above the page it moved above
                moves = [(hi, lo) for hi, lo in pairs if self._prefers(positions[row], parts, order[hi], order[lo])]
                if not moves:
                    break
                hi, lo = moves[0]
                order.insert(hi, order.pop(lo))
            own = scores[row, order]
            positions[row, :depth] = positions[row, order]
            scores[row, :depth] = np.maximum.accumulate(own[::-1])[::-1]
        return positions, scores

    def _prefers(self, positions: np.ndarray, parts: np.ndarray, holder: int, held: int) -> bool:
        """Whether the page at result `held` moves above the one at `holder`: that one holds it and none of its
        page-evidence components (`parts`: components x results) is the larger."""
        return bool(self.holds(positions[holder], positions[held])) and bool(
            np.all(parts[:, holder] <= parts[:, held] + 1e-6)
        )
