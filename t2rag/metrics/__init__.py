"""Benchmark metrics: Number Match for answers, MRR/Recall/NDCG for retrieval, per subset and weighted."""

from t2rag.metrics.number_match import EPSILON, number_match, number_match_one
from t2rag.metrics.retrieval import gold_ranks, mrr_at_k, ndcg_at_k, recall_at_k, retrieval_metric
from t2rag.metrics.summary import DEFAULT_RETRIEVAL_METRICS, summarize, weighted_average

__all__ = [
    "DEFAULT_RETRIEVAL_METRICS",
    "EPSILON",
    "gold_ranks",
    "mrr_at_k",
    "ndcg_at_k",
    "number_match",
    "number_match_one",
    "recall_at_k",
    "retrieval_metric",
    "summarize",
    "weighted_average",
]
