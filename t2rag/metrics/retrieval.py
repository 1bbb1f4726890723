"""Rank-based retrieval metrics with one gold context per question.

The rank of the gold context is its 1-based position in the ranked list exactly as the retriever returned it
(0 when absent). Nothing here re-sorts by score: BM25 produces ties and some methods return no scores, and
re-sorting would silently change their results.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def gold_ranks(ranked: pa.Array | pa.ChunkedArray | Sequence[Sequence[str] | None], gold: Sequence[str]) -> np.ndarray:
    """1-based rank of each question's gold id in its ranked list, 0 when it is not there (vectorised)."""
    lists = _as_list_array(ranked)
    gold_arr = np.asarray(list(gold) if not isinstance(gold, np.ndarray) else gold, dtype=object)
    if len(lists) != len(gold_arr):
        raise ValueError(f"{len(lists)} ranked lists but {len(gold_arr)} gold ids")
    ranks = np.zeros(len(lists), dtype=np.int64)
    if len(lists) == 0:
        return ranks
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy()
    if len(flat) == 0:
        return ranks
    hits = pc.equal(flat, pa.array(gold_arr[parents], pa.string())).fill_null(False).to_numpy(zero_copy_only=False)
    # Position of every flattened element inside its own list.
    starts = lists.offsets.to_numpy()[:-1] - lists.offsets[0].as_py()
    position = np.arange(len(flat)) - starts[parents]
    hit_rows, first = np.unique(parents[hits], return_index=True)
    ranks[hit_rows] = position[hits][first] + 1
    return ranks


def _as_list_array(ranked: pa.Array | pa.ChunkedArray | Sequence[Sequence[str] | None]) -> pa.ListArray:
    if isinstance(ranked, pa.ChunkedArray):
        ranked = ranked.combine_chunks() if ranked.num_chunks else pa.array([], pa.list_(pa.string()))
    if not isinstance(ranked, pa.Array):
        ranked = pa.array([None if r is None else [str(x) for x in r] for r in ranked], pa.list_(pa.string()))
    if pa.types.is_large_list(ranked.type):
        ranked = ranked.cast(pa.list_(pa.string()))
    if not pa.types.is_string(ranked.type.value_type):
        ranked = ranked.cast(pa.list_(pa.string()))
    return ranked


def reciprocal_ranks(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per question: 1/r where 1 <= r <= k, else 0."""
    ranks = np.asarray(ranks)
    hit = (ranks >= 1) & (ranks <= k)
    return np.where(hit, 1.0 / np.maximum(ranks, 1), 0.0)


def hits_at_k(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per question: 1.0 when the gold context is in the top k."""
    ranks = np.asarray(ranks)
    return ((ranks >= 1) & (ranks <= k)).astype(np.float64)


def dcg_at_k(ranks: np.ndarray, k: int) -> np.ndarray:
    """Per question: 1/log2(r + 1) within the top k (binary relevance, one relevant document: DCG = NDCG)."""
    ranks = np.asarray(ranks)
    hit = (ranks >= 1) & (ranks <= k)
    return np.where(hit, 1.0 / np.log2(np.maximum(ranks, 1) + 1.0), 0.0)


PER_QUERY = {"mrr": reciprocal_ranks, "recall": hits_at_k, "ndcg": dcg_at_k}


def parse_metric(name: str) -> tuple[str, int]:
    """Split 'mrr@3' into ('mrr', 3)."""
    base, _, k = name.partition("@")
    if base not in PER_QUERY or not k.isdigit() or int(k) < 1:
        raise ValueError(f"unknown retrieval metric '{name}' (use mrr@k, recall@k or ndcg@k)")
    return base, int(k)


def per_query(name: str, ranks: np.ndarray) -> np.ndarray:
    """Per-question values of a metric named like 'recall@5' (their mean is the metric)."""
    base, k = parse_metric(name)
    return PER_QUERY[base](ranks, k)


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else float("nan")


def mrr_at_k(ranks: np.ndarray, k: int) -> float:
    """Mean reciprocal rank cut at k, as a fraction."""
    return _mean(reciprocal_ranks(ranks, k))


def recall_at_k(ranks: np.ndarray, k: int) -> float:
    """Share of questions whose gold context is in the top k, as a fraction."""
    return _mean(hits_at_k(ranks, k))


def ndcg_at_k(ranks: np.ndarray, k: int) -> float:
    """NDCG@k with binary relevance and one relevant document (ideal DCG = 1), as a fraction."""
    return _mean(dcg_at_k(ranks, k))
