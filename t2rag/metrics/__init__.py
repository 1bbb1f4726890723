"""Per-question metrics: Number Match for answers with its family's yardsticks (TAT-QA's EM and F1, FinQA's
execution accuracy: t2rag.metrics.answers), MRR/Recall/NDCG for retrieval (summed per subset and weighted
over subsets in `t2rag.run_folder.scorecards`)."""

from t2rag.metrics.number_match import EPSILON, number_match, number_match_one
from t2rag.metrics.retrieval import gold_ranks, mrr_at_k, ndcg_at_k, per_query, recall_at_k

__all__ = [
    "EPSILON",
    "gold_ranks",
    "mrr_at_k",
    "ndcg_at_k",
    "number_match",
    "number_match_one",
    "per_query",
    "recall_at_k",
]
