"""The reranking stage: a cross-encoder re-scores the retrieved pool (pool_factor x k candidates) of each question."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pyarrow as pa

from t2rag.config import RunConfig
from t2rag.methods import get_method
from t2rag.retrieval import Hits
from t2rag.retrieval.base import result_depth
from t2rag.retrieval.reranker import CrossEncoderScorer
from t2rag.stages.base import Stage, column, groups, row_k, set_rows, with_columns
from t2rag.stages.retrieve import RANKING_TYPES, ranking_arrays, ranking_columns


class Rerank(Stage):
    """`question`, `context_ids` (the pool, best first), `context_id` (gold, optional), `k` (optional)
    -> `context_ids`, `scores`, `gold_rank` of the reranked top max(k, 5)."""

    name = "rerank"
    reads = ("method", "subset", "question", "context_ids", "scores", "gold_rank")
    optional = ("context_id", "k")
    adds = pa.schema(RANKING_TYPES)
    pool = "rerank"

    @classmethod
    def candidates(cls, config: RunConfig, k: int) -> int:
        return config.retrieval.reranker.pool_factor * k

    @cached_property
    def scorer(self) -> CrossEncoderScorer:
        return CrossEncoderScorer(self.config.retrieval.reranker)

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = {name: batch.column(name).to_pylist() for name in RANKING_TYPES}
        questions = batch.column("question").to_pylist()
        gold = column(batch, "context_id")
        keyed = with_columns(batch, {"_k": pa.array(row_k(batch, self.config.retrieval.k), pa.int64())})
        for (method_name, subset, k), rows in groups(keyed, "method", "subset", "_k"):
            corpus = self.resources.retriever(get_method(method_name), subset).corpus
            position = corpus.positions
            pools = [out["context_ids"][i] or [] for i in rows]
            idx = np.full((len(rows), max((len(p) for p in pools), default=0)), -1, dtype=np.int64)
            for r, pool in enumerate(pools):
                idx[r, : len(pool)] = [position[c] for c in pool]
            pool = Hits(idx, np.full(idx.shape, np.nan))
            hits = self.scorer.rerank([questions[i] for i in rows], pool, corpus, result_depth(k))
            for name, values in ranking_columns(hits, corpus, [gold[i] for i in rows]).items():
                set_rows(out[name], rows, values)
        return with_columns(batch, ranking_arrays(out))
