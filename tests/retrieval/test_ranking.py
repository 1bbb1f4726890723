"""top_n must equal a full lexicographic sort, ties included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from t2rag.retrieval.ranking import top_n


def _full_sort(primary, n, *secondary, valid=None):
    rows, docs = primary.shape
    out = []
    for r in range(rows):
        items = [d for d in range(docs) if valid is None or valid[r, d]]
        items.sort(key=lambda d: (-primary[r, d], *(-s[r, d] for s in secondary), d))
        out.append((items + [-1] * n)[:n])
    return np.array(out, dtype=np.int64).reshape(rows, n)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 120),
    st.integers(1, 12),
    st.integers(0, 3),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_top_n_equals_full_sort(rows, docs, n, levels, masked, seed):
    rng = np.random.default_rng(seed)
    # Few distinct values: lots of ties, including at the cut-off.
    primary = rng.integers(0, max(levels, 1) + 1, size=(rows, docs)).astype(float)
    secondary = rng.integers(0, 3, size=(rows, docs)).astype(float)
    valid = rng.random((rows, docs)) > 0.3 if masked else None
    idx, scores = top_n(primary, n, secondary, valid=valid)
    expected = _full_sort(primary, min(n, docs), secondary, valid=valid)
    assert np.array_equal(idx, expected)
    ok = expected >= 0
    assert np.array_equal(scores[ok], np.take_along_axis(primary, np.maximum(expected, 0), 1)[ok])
    assert np.isnan(scores[~ok]).all()


def test_many_ties_beyond_candidate_width():
    primary = np.zeros((2, 500))
    primary[1, 499] = 1.0
    idx, _ = top_n(primary, 3)
    assert idx.tolist() == [[0, 1, 2], [499, 0, 1]]
