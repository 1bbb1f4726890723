"""The reranking stage: a cross-encoder re-scores the retrieved candidates (candidate_factor x k) of each question."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pyarrow as pa

from t2rag.methods import get_method
from t2rag.retrieval import Hits
from t2rag.retrieval.base import result_depth
from t2rag.retrieval.reranker import CrossEncoderScorer
from t2rag.stages.base import CORPUS_COLUMNS, Stage, column, groups, set_rows, with_columns, with_search_keys
from t2rag.stages.retrieve import RANKING_TYPES, ranking_arrays, ranking_columns


class Rerank(Stage):
    """`question`, `context_ids` (the candidates, best first), `context_id` (gold, optional), `k` (optional)
    -> `context_ids`, `scores`, `gold_rank` of the reranked top `result_depth(k)` (max(k, MIN_DEPTH))."""

    name = "rerank"
    reads = ("method", "question", "context_ids", "scores", "gold_rank")
    optional = (*CORPUS_COLUMNS, "context_id", "k")
    adds = pa.schema(RANKING_TYPES)
    pool = "rerank"

    @cached_property
    def scorer(self) -> CrossEncoderScorer:
        return CrossEncoderScorer(self.config.retrieval.reranker)

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = {name: batch.column(name).to_pylist() for name in RANKING_TYPES}
        questions = batch.column("question").to_pylist()
        gold = column(batch, "context_id")
        keyed = with_search_keys(batch, self.config.retrieval.k)
        for (method_name, corpus_name, k), rows in groups(keyed, "method", "_corpus", "_k"):
            corpus = self.resources.retriever(get_method(method_name), corpus_name).corpus
            position = corpus.positions
            lists = [out["context_ids"][i] or [] for i in rows]
            idx = np.full((len(rows), max((len(c) for c in lists), default=0)), -1, dtype=np.int64)
            for r, ids in enumerate(lists):
                idx[r, : len(ids)] = [position[c] for c in ids]
            candidates = Hits(idx, np.full(idx.shape, np.nan))
            hits = self.scorer.rerank([questions[i] for i in rows], candidates, corpus, result_depth(k))
            for name, values in ranking_columns(hits, corpus, [gold[i] for i in rows]).items():
                set_rows(out[name], rows, values)
        return with_columns(batch, ranking_arrays(out))
