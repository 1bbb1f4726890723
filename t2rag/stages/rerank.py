"""The reranking stages: the built-in cross-encoder re-scores the retrieved candidates (candidate_factor x k) of each
question; `RerankStage` is the base of a reranking plugin, which scores the texts of each question's top candidates
and reorders them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from typing import ClassVar

import numpy as np
import pyarrow as pa

from t2rag import plugins
from t2rag.errors import PluginError
from t2rag.methods import get_method
from t2rag.metrics.retrieval import gold_ranks
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


class RerankStage(Stage):
    """The base of a reranking plugin: subclass it, set `name` (and `candidates`, `settings` as needed) and write
    `score`. It reads each question's ranking (`context_ids`, best first), gives `score` the question and the texts
    of its first `candidates` contexts, and writes them back best first by that score, above the rest of the
    ranking as it was (their scores NaN); `gold_rank` follows. On Ray it runs in the `rerank` pool (GPU actors of
    `ray.rerank`); it comes after `retrieve` unless `after` says otherwise."""

    reads = ("method", "question", "context_ids", "scores", "gold_rank")
    optional = (*CORPUS_COLUMNS, "context_id", "k")
    adds = pa.schema(RANKING_TYPES)
    pool = "rerank"
    after = "retrieve"
    #: How many of the first ranked contexts `score` reads and reorders.
    candidates: ClassVar[int] = 10

    def score(self, questions: list[str], texts: list[list[str]]) -> Sequence[Sequence[float]]:
        """One score per candidate text of each question (higher ranks first): `texts[i]` are the contexts of
        `questions[i]`, best first as ranked."""
        raise NotImplementedError(f"stage '{self.name}' does not implement score")

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = {name: batch.column(name).to_pylist() for name in RANKING_TYPES}
        questions = batch.column("question").to_pylist()
        gold = column(batch, "context_id")
        keyed = with_search_keys(batch, self.config.retrieval.k)
        for (method_name, corpus_name, _k), rows in groups(keyed, "method", "_corpus", "_k"):
            corpus = self.resources.index_corpus(get_method(method_name), corpus_name)
            heads = [(out["context_ids"][i] or [])[: self.candidates] for i in rows]
            scores = self.score([questions[i] for i in rows], [corpus.texts_of(ids) for ids in heads])
            problem = scores_problem(scores, [len(h) for h in heads])
            if problem:
                raise PluginError(f"plugin {plugins.origin_of('t2rag.stages', self.name).label}: stage "
                                  f"'{self.name}' returned {problem}")  # fmt: skip
            for row, head, mine in zip(rows, heads, scores, strict=True):
                order = np.argsort(-np.asarray(mine, np.float64), kind="stable")
                rest = (out["context_ids"][row] or [])[len(head) :]
                out["context_ids"][row] = [head[j] for j in order] + rest
                out["scores"][row] = [float(mine[j]) for j in order] + [math.nan] * len(rest)
            ranked = [out["context_ids"][i] for i in rows]
            ranks = gold_ranks(ranked, [gold[i] or "" for i in rows]).astype(int).tolist()
            set_rows(
                out["gold_rank"], rows, [r if gold[i] is not None else None for r, i in zip(ranks, rows, strict=True)]
            )
        return with_columns(batch, ranking_arrays(out))


def scores_problem(scores: object, lengths: list[int]) -> str | None:
    """What is wrong with a reranker's scores for questions with these numbers of candidates, or None."""
    if not isinstance(scores, Sequence | np.ndarray) or len(scores) != len(lengths):
        got = len(scores) if isinstance(scores, Sequence | np.ndarray) else type(scores).__name__
        return f"scores for {got} questions of {len(lengths)} (a row dropped or added)"
    for i, (mine, n) in enumerate(zip(scores, lengths, strict=True)):
        if not isinstance(mine, Sequence | np.ndarray) or isinstance(mine, str):
            return f"a {type(mine).__name__}, not a list of scores, for question {i}"
        if len(mine) != n:
            return f"{len(mine)} scores for the {n} candidates of question {i}"
        try:
            values = np.asarray(mine, dtype=np.float64)
        except (TypeError, ValueError):
            return f"scores that are not numbers for question {i}"
        if values.ndim != 1 or not np.isfinite(values).all():
            return f"a score that is not a finite number for question {i}"
    return None
