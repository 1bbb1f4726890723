"""A fused retriever over a corpus too large for one process: shards that each index their documents with the whole
corpus's statistics, and a merge that completes their scores exactly.

Three things of a fused score depend on the whole corpus. Corpus statistics (BM25's document frequencies and
lengths, the companies' names, the row-label words' idf) are gathered first from every shard (`ShardFacts`, merged
into `CorpusFacts`) and given to each shard's index. Two components are scaled by a question's best document over the
whole corpus (BM25, the line-item mass): a shard scales them by its own best, returns its `width` best documents
with their components unscaled (`ShardCandidates`), and the merge rescales them by the best over every shard
(`FirstStage.combine`, the same float operations as the unsharded search), takes the global first-stage candidates
and adds the second-stage features that each shard computed for its own, weighted.

That is exact when every document the unsharded first stage would choose is among some shard's returned ones. A
global best is never below a shard's, so rescaling only lowers a score: a document a shard did not return scores at
most that shard's `threshold` (its `width`-th score under its own bests), and at most its left-out documents'
largest components scored together under the corpus's bests (every component and weight is non-negative). A
question is `certified` when its first stage's last candidate scores above the lower of those two bounds in every
shard; the merge says how many are not (a wider `width` certifies them). Dense components are not sharded
(their list is scaled over the whole corpus's top list).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import Hits, QueryBlock, as_block, result_depth
from t2rag.retrieval.contained_pages import DEPTH, ContainedPages, ReportPages
from t2rag.retrieval.fusion.weighted import (
    BYTES_PER_SCORE,
    FUSION_BYTES,
    THIRD_STAGE,
    FirstStage,
    FusedRetriever,
    FusionWeights,
    page_evidence_of,
)
from t2rag.retrieval.lexical.bm25_matrix import BM25Statistics
from t2rag.retrieval.metadata_prior import DocumentMetadata, MetadataPrior
from t2rag.retrieval.page_evidence.features import PageEvidence
from t2rag.retrieval.page_evidence.keys import RowWordCounts


@dataclass(frozen=True)
class ShardFacts:
    """What one shard contributes to the whole corpus's statistics (None: a component the retriever does not use)."""

    bm25: BM25Statistics | None
    metadata: DocumentMetadata | None
    row_words: RowWordCounts | None
    pages: ReportPages | None

    @classmethod
    def of(cls, retriever: FusedRetriever, part: Corpus) -> ShardFacts:
        _check(retriever)
        metadata = DocumentMetadata.of(part, retriever.metadata) if retriever.metadata is not None else None
        return cls(
            retriever.lexical.statistics(part) if retriever.lexical is not None else None,
            metadata,
            RowWordCounts.of(part.texts) if retriever.reads_pages else None,
            ReportPages.of(part.texts, metadata.names, metadata.years) if retriever.prefer_held else None,
        )


@dataclass(frozen=True)
class CorpusFacts:
    """The whole corpus's statistics, which every shard's index is built with."""

    bm25: BM25Statistics | None
    prior: MetadataPrior | None
    row_words: RowWordCounts | None
    contained: ContainedPages | None  # which page of a report holds which, over the corpus's positions

    @classmethod
    def merge(cls, parts: Sequence[ShardFacts]) -> CorpusFacts:
        """The facts of consecutive shards of one corpus, in corpus order."""
        first = parts[0]
        metadata = DocumentMetadata.joined([p.metadata for p in parts]) if first.metadata is not None else None
        return cls(
            BM25Statistics.merge([p.bm25 for p in parts]) if first.bm25 is not None else None,
            MetadataPrior.of(metadata) if metadata is not None else None,
            RowWordCounts.merge([p.row_words for p in parts]) if first.row_words is not None else None,
            ContainedPages.of_pages(ReportPages.joined([p.pages for p in parts])) if first.pages is not None else None,
        )


def index_shard(retriever: FusedRetriever, part: Corpus, docs: range, facts: CorpusFacts) -> None:
    """Index the documents `docs` of a corpus (given as `part`, positions shard-local) with the corpus's facts."""
    _check(retriever)
    retriever._corpus = part
    if retriever.lexical is not None:
        retriever.lexical.index_part(part, facts.bm25)
    if facts.prior is not None:
        retriever.prior = facts.prior.restricted(docs)
    if facts.row_words is not None:
        retriever.page = PageEvidence(part.texts, facts.row_words)


@dataclass(frozen=True)
class ShardCandidates:
    """A shard's best documents for a block of questions, with what the merge needs to finish their scores."""

    positions: np.ndarray  # (questions x width) corpus-wide
    stage: FirstStage  # their first-stage components, BM25 and line-item mass unscaled
    features: dict[str, np.ndarray]  # (questions x width) each weighted second-stage feature
    threshold: np.ndarray  # per question: no document left out scores above it (-inf: none was left out)
    left_out: FirstStage  # per question, each component's largest value over the documents left out
    best_lexical: np.ndarray  # per question, the shard's best BM25 score
    best_item: np.ndarray  # and its best line-item mass

    def bound(self, weights: FusionWeights, best_lexical: np.ndarray, best_item: np.ndarray) -> np.ndarray:
        """Per question, a score no document this shard left out reaches under the corpus's bests: its threshold,
        or the left-out components' largest values scored together, whichever is lower."""
        return np.minimum(self.threshold, self.left_out.combine(weights, best_lexical, best_item)[:, 0])


def shard_candidates(
    retriever: FusedRetriever, queries: Sequence[str] | QueryBlock, width: int, first: int
) -> ShardCandidates:
    """The `width` best documents of an indexed shard (whose first document is the corpus's `first`) for every
    question, a few questions at a time so memory stays within FUSION_BYTES."""
    block = as_block(queries)
    n_docs = len(retriever.corpus)
    step = max(1, FUSION_BYTES // (BYTES_PER_SCORE * max(n_docs, 1)))
    parts = [_span_candidates(retriever, block.slice(s, s + step), width) for s in range(0, len(block), step)]
    return ShardCandidates(
        np.concatenate([p.positions for p in parts]) + first,
        FirstStage.joined([p.stage for p in parts], axis=0),
        {f: np.concatenate([p.features[f] for p in parts]) for f in parts[0].features},
        np.concatenate([p.threshold for p in parts]),
        FirstStage.joined([p.left_out for p in parts], axis=0),
        np.concatenate([p.best_lexical for p in parts]),
        np.concatenate([p.best_item for p in parts]),
    )


def _span_candidates(retriever: FusedRetriever, block: QueryBlock, width: int) -> ShardCandidates:
    reading = retriever.read(block.texts)
    stage = retriever.first_stage_parts(block, reading)
    best_lexical, best_item = stage.maxima()
    first = stage.combine(retriever.weights, best_lexical, best_item)
    width = min(width, first.shape[1])
    if width < first.shape[1]:
        chosen = np.argpartition(-first, width - 1, axis=1)[:, :width]
        threshold = np.take_along_axis(first, chosen, axis=1).min(axis=1)
    else:
        chosen = np.broadcast_to(np.arange(first.shape[1]), first.shape).copy()
        threshold = np.full(len(block), -np.inf)
    features = retriever.second_stage_features(reading.asked, chosen)
    left_out = stage.most_left_out(chosen)
    return ShardCandidates(chosen, stage.gather(chosen), features, threshold, left_out, best_lexical, best_item)


def merge_candidates(
    retriever: FusedRetriever,
    parts: Sequence[ShardCandidates],
    k: int,
    depth: int | None = None,
    contained: ContainedPages | None = None,
) -> tuple[Hits, np.ndarray]:
    """The fused ranking of the whole corpus from its shards' candidates, and per question whether it is certified
    exact (see the module's docstring); `contained`: the corpus's (`CorpusFacts.contained`), for a retriever that
    prefers held pages."""
    n = result_depth(k, depth)
    best_lexical = np.max([p.best_lexical for p in parts], axis=0)
    best_item = np.max([p.best_item for p in parts], axis=0)
    positions = np.concatenate([p.positions for p in parts], axis=1)
    stage = FirstStage.joined([p.stage for p in parts], axis=1)
    first = stage.combine(retriever.weights, best_lexical, best_item)
    features = {f: np.concatenate([p.features[f] for p in parts], axis=1) for f in parts[0].features}
    second = retriever.weighted_second_stage(features, positions.shape)
    width = min(max(retriever.candidates, n), positions.shape[1])
    order = np.lexsort((positions, -first), axis=-1)[:, :width]
    chosen, first = np.take_along_axis(positions, order, axis=1), np.take_along_axis(first, order, axis=1)
    scores = first + np.take_along_axis(second, order, axis=1)
    third = {f: np.take_along_axis(v, order, axis=1) for f, v in features.items() if f in THIRD_STAGE}
    scores = retriever.third_stage(None, chosen, scores, third)
    bound = np.max([p.bound(retriever.weights, best_lexical, best_item) for p in parts], axis=0)
    certified = first[:, -1] > bound if width else np.ones(len(first), bool)
    ranked = np.lexsort((chosen, -scores), axis=-1)[:, : min(n, width)]
    positions, scores = np.take_along_axis(chosen, ranked, axis=1), np.take_along_axis(scores, ranked, axis=1)
    if contained is not None and retriever.prefer_held:

        def evidence(row: int) -> np.ndarray:
            columns = order[row, ranked[row, :DEPTH]]  # the results' columns among every shard's candidates
            return page_evidence_of(stage, features, row, columns, columns)

        positions, scores = contained.prefer_held(positions, scores, evidence)
    return Hits(positions, scores), certified


def _check(retriever: FusedRetriever) -> None:
    if retriever.dense is not None:
        raise ValueError(f"{retriever.name}: a dense component cannot be sharded (its list is the whole corpus's)")
