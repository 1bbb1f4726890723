"""Exact top-n selection for a block of score rows, with deterministic tie-breaking.

Ranks every row of a (queries x documents) score matrix by a primary score (descending), then by optional
secondary keys, and finally by document position, so equal scores always come back in corpus order. A partial
sort picks a small candidate set per row; rows whose boundary ties exceed it are ranked in full, so the result
always equals a full lexicographic sort.
"""

from __future__ import annotations

import numpy as np


def top_n(
    primary: np.ndarray, n: int, *secondary: np.ndarray, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and primary scores of the n best documents per row.

    primary and every secondary key are (rows, docs) arrays where larger is better. Documents where `valid` is
    False are never returned; rows with fewer valid documents are padded with index -1 and score NaN.
    """
    primary = np.asarray(primary, dtype=np.float64)
    rows, docs = primary.shape
    n = min(n, docs)
    keyed = np.where(valid, primary, -np.inf) if valid is not None else primary
    if n == 0 or rows == 0:
        return np.full((rows, n), -1, np.int64), np.full((rows, n), np.nan)
    width = min(docs, max(4 * n, n + 16))
    if width < docs:
        cand = np.argpartition(-keyed, width - 1, axis=1)[:, :width]
        # The n-th best value per row (the candidates hold the best `width`); if more documents than the candidates
        # tie at it, rank that row in full.
        nth = -np.partition(-np.take_along_axis(keyed, cand, axis=1), n - 1, axis=1)[:, n - 1]
        at_least = (keyed >= nth[:, None]).sum(axis=1)
        full_rows = np.flatnonzero(at_least > width)
    else:
        cand = np.broadcast_to(np.arange(docs), (rows, docs))
        full_rows = np.array([], dtype=np.int64)

    out_idx = _ordered(keyed, cand, secondary, n)
    for r in full_rows:  # rare: massive ties at the cut-off
        out_idx[r] = _ordered(keyed[r : r + 1], np.arange(docs)[None, :], tuple(s[r : r + 1] for s in secondary), n)[0]
    scores = np.take_along_axis(keyed, out_idx, axis=1)
    bad = ~np.isfinite(scores) if valid is not None else np.zeros_like(scores, dtype=bool)
    out_idx = np.where(bad, -1, out_idx)
    return out_idx, np.where(bad, np.nan, np.take_along_axis(primary, np.maximum(out_idx, 0), axis=1))


def _ordered(keyed: np.ndarray, cand: np.ndarray, secondary: tuple[np.ndarray, ...], n: int) -> np.ndarray:
    keys = [cand]  # last resort: corpus position, ascending
    keys += [-np.take_along_axis(np.asarray(s, dtype=np.float64), cand, axis=1) for s in reversed(secondary)]
    keys.append(-np.take_along_axis(keyed, cand, axis=1))
    order = np.lexsort(keys, axis=-1)[:, :n]
    return np.take_along_axis(cand, order, axis=1)
