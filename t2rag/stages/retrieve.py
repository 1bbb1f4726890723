"""The retrieval stage: rank the corpus each question names, one block search per (method, corpus, k)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from t2rag.config import RunConfig
from t2rag.data.corpus import Corpus
from t2rag.methods import Method, get_method
from t2rag.metrics.retrieval import gold_ranks
from t2rag.retrieval import Hits, QueryBlock
from t2rag.retrieval.base import result_depth
from t2rag.retrieval.shards import merge_hits, offset_hits
from t2rag.stages.base import CORPUS_COLUMNS, Stage, column, groups, set_rows, with_columns, with_search_keys
from t2rag.stages.embed import vectors_of

RANKING_TYPES: dict[str, pa.DataType] = {
    "context_ids": pa.list_(pa.string()),
    "scores": pa.list_(pa.float64()),
    "gold_rank": pa.int32(),
}


def search_depth(method: Method, config: RunConfig, k: int) -> int:
    """Results a method's search returns: max(k, MIN_DEPTH); for a reranking method exactly the reranker's
    candidates (its candidate_factor x k, at least k)."""
    if "rerank" in method.stages:
        return max(k, config.retrieval.reranker.candidate_factor * k)
    return result_depth(k)


def ranking_columns(hits: Hits, corpus: Corpus, gold: list[str | None]) -> dict[str, list]:
    """Ranked ids, scores and the 1-based rank of the gold context (0: absent; null: no gold id given)."""
    ids = hits.context_ids(corpus)
    if all(g is None for g in gold):  # served queries have no gold
        return {"context_ids": ids, "scores": hits.score_lists(), "gold_rank": [None] * len(gold)}
    ranks = gold_ranks(ids, [g or "" for g in gold]).astype(np.int32).tolist()
    return {
        "context_ids": ids,
        "scores": hits.score_lists(),
        "gold_rank": [r if g is not None else None for r, g in zip(ranks, gold, strict=True)],
    }


def ranking_arrays(columns: dict[str, list]) -> dict[str, pa.Array]:
    return {name: pa.array(values, RANKING_TYPES[name]) for name, values in columns.items()}


#: The running top list a shard's actors pass to the next shard's (corpus positions, scores; -1 and NaN: empty).
SHARD_TYPES: dict[str, pa.DataType] = {"shard_positions": pa.list_(pa.int64()), "shard_scores": pa.list_(pa.float64())}


class Retrieve(Stage):
    """`question`, `query_vector` (dense retrievers), `context_id` (gold, optional), `k` (optional)
    -> `context_ids`, `scores`, `gold_rank`.

    The corpus is the one the row names (`corpus`, else its `subset`: t2rag.stages.base.corpus_column);
    summary-indexed methods search the summaries of that corpus.
    In the actors of one shard of a sharded corpus (`retrieval.shard`, Ray), it merges its shard's hits into
    `shard_positions` / `shard_scores` from the shards before, and the last shard writes the ranking columns.
    """

    name = "retrieve"
    reads = ("method", "question")
    optional = (*CORPUS_COLUMNS, "query_vector", "context_id", "k", *SHARD_TYPES)
    adds = pa.schema({**RANKING_TYPES, **SHARD_TYPES})  # the shard columns only between the shards of a sharded corpus
    drops = tuple(SHARD_TYPES)
    pool = "retrieve"

    def __call__(self, batch: pa.Table) -> pa.Table:
        n = batch.num_rows
        shard = self.config.retrieval.shard
        last = shard is None or shard == self.config.retrieval.shards - 1
        out: dict[str, list] = {name: [None] * n for name in (RANKING_TYPES if last else SHARD_TYPES)}
        questions = batch.column("question").to_pylist()
        vectors = vectors_of(batch.column("query_vector")) if "query_vector" in batch.column_names else None
        gold = column(batch, "context_id")
        keyed = with_search_keys(batch, self.config.retrieval.k)
        for (method_name, corpus_name, k), rows in groups(keyed, "method", "_corpus", "_k"):
            method = get_method(method_name)
            retriever = self.resources.retriever(method, corpus_name)
            block = QueryBlock([questions[i] for i in rows])
            if retriever.needs_query_vectors:
                if vectors is None:
                    raise ValueError(f"method {method_name} searches with query vectors: run embed_queries first")
                block.vectors = vectors[rows]
            depth = search_depth(method, self.config, k)
            hits = retriever.search(block, k, depth=depth)
            corpus = retriever.corpus
            if shard is not None:  # the retriever holds a shard: positions and ids come from the whole corpus
                corpus = self.resources.index_corpus(method, corpus_name)
                hits = self._with_earlier_shards(batch, rows, hits, depth, len(corpus))
                if not last:
                    set_rows(out["shard_positions"], rows, hits.indices.tolist())
                    set_rows(out["shard_scores"], rows, hits.scores.tolist())
                    continue
            for name, values in ranking_columns(hits, corpus, [gold[i] for i in rows]).items():
                set_rows(out[name], rows, values)
        if not last:
            return with_columns(batch, {name: pa.array(values, SHARD_TYPES[name]) for name, values in out.items()})
        batch = self.without_drops(batch)
        return with_columns(batch, ranking_arrays(out))

    def _with_earlier_shards(self, batch: pa.Table, rows: np.ndarray, hits: Hits, depth: int, n_docs: int) -> Hits:
        """This shard's hits at corpus positions, merged with the running list from the shards before."""
        parts = [offset_hits(hits, self.config.retrieval.held_shard(n_docs).start)]
        if "shard_positions" in batch.column_names:
            positions = batch.column("shard_positions").take(pa.array(rows)).to_pylist()
            scores = batch.column("shard_scores").take(pa.array(rows)).to_pylist()
            parts.append(Hits(np.array(positions, np.int64), np.array(scores, np.float64)))
        return merge_hits(parts, depth)
