"""Benchmark metrics: Number Match for answers, MRR/Recall/NDCG for retrieval, per subset and weighted."""

from t2rag.metrics.number_match import EPSILON, number_match, number_match_one
from t2rag.metrics.retrieval import gold_ranks, mrr_at_k, ndcg_at_k, per_query, recall_at_k
from t2rag.metrics.summary import (
    DEFAULT_RETRIEVAL_METRICS,
    SubsetTotals,
    summary_from_totals,
    weighted_average,
)

__all__ = [
    "DEFAULT_RETRIEVAL_METRICS",
    "EPSILON",
    "SubsetTotals",
    "gold_ranks",
    "mrr_at_k",
    "ndcg_at_k",
    "number_match",
    "number_match_one",
    "per_query",
    "recall_at_k",
    "summary_from_totals",
    "weighted_average",
]
