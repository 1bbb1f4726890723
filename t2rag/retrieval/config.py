"""Typed retrieval settings and the registry that turns a retriever name into an object."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pydantic import BaseModel, ConfigDict, Field, model_validator

from t2rag.retrieval.base import Retriever
from t2rag.retrieval.dense.chunked import ChunkedDenseRetriever
from t2rag.retrieval.dense.chunking import ChunkingConfig
from t2rag.retrieval.dense.embedder import EmbedderConfig
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.dense.vector_store import AnnConfig
from t2rag.retrieval.fusion.hybrid import HybridBM25Retriever, HybridRRFRetriever
from t2rag.retrieval.fusion.weighted import FUSED_METHODS, FusedRetriever, FusionConfig, FusionWeights
from t2rag.retrieval.lexical.bm25 import BM25Retriever
from t2rag.retrieval.reranker import RerankerConfig
from t2rag.retrieval.shards import ShardedRetriever, shard_ranges
from t2rag.tokenize import TOKENIZERS


class BM25Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tokenizer: str = "whitespace"
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25

    @model_validator(mode="after")
    def _known_tokenizer(self) -> BM25Config:
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer '{self.tokenizer}' (choose from {sorted(TOKENIZERS)})")
        return self


class HybridConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(0.5, ge=0, le=1)
    beta: float = Field(0.5, ge=0, le=1)
    rrf_k: int = Field(60, ge=1)
    rrf_candidates: int = Field(50, ge=1)

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> HybridConfig:
        if abs(self.alpha + self.beta - 1.0) > 1e-9:
            raise ValueError(f"hybrid alpha + beta must be 1 (got {self.alpha} + {self.beta})")
        return self


class RetrievalConfig(BaseModel):
    """Everything the retrievers need; `k` is the number of contexts given to the generator (paper: 3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int = Field(3, ge=1, le=100)  # contexts the generator reads (and the cut of MRR@k, Recall@k)
    embedder: EmbedderConfig = EmbedderConfig()
    index_uri: str | None = None  # LanceDB location, local or s3://; default ~/.cache/t2rag/lancedb
    bm25: BM25Config = BM25Config()
    hybrid: HybridConfig = HybridConfig()
    reranker: RerankerConfig = RerankerConfig()
    ann: AnnConfig = AnnConfig()  # flat (exact) dense search unless ann.above is set
    chunking: ChunkingConfig = ChunkingConfig()  # how the chunked retrievers cut contexts
    fusion: FusionConfig = FusionConfig()  # the fused retrievers' weights and settings (bm25_meta, bm25_focus, ...)
    #: Split each corpus into this many document ranges, searched separately and merged exactly (bm25, base).
    #: On Ray each shard is held by its own retrieval actors; in one process they run one after another.
    shards: int = Field(1, ge=1)
    #: Set by Ray's placement for a shard's actors: this process holds only that shard (0-based).
    shard: int | None = Field(None, ge=0)

    @property
    def holds_every_shard(self) -> bool:
        """The corpus is split into shards and this config searches them all (no one `shard` is chosen)."""
        return self.shards > 1 and self.shard is None

    def held_shard(self, n_docs: int) -> range | None:
        """The documents this process holds of a corpus of n_docs (None: all of them, unsharded or in turn)."""
        return None if self.shard is None else shard_ranges(n_docs, self.shards)[self.shard]

    @model_validator(mode="after")
    def _shard_exists(self) -> RetrievalConfig:
        if self.shard is not None and self.shard >= self.shards:
            raise ValueError(f"retrieval.shard {self.shard} is not below retrieval.shards {self.shards}")
        return self


def _dense(c: RetrievalConfig) -> DenseRetriever:
    return DenseRetriever(c.embedder, c.index_uri, c.ann)


def _bm25(c: RetrievalConfig, tokenizer: str | None = None) -> BM25Retriever:
    return BM25Retriever(tokenizer or c.bm25.tokenizer, c.bm25.k1, c.bm25.b, c.bm25.epsilon)


def _chunked(c: RetrievalConfig) -> ChunkedDenseRetriever:
    return ChunkedDenseRetriever(c.embedder, c.index_uri, c.ann, c.chunking)


def fused_retriever(name: str, c: RetrievalConfig, weights: FusionWeights | None = None) -> FusedRetriever:
    """A fused retriever with the config's weights for it (or these)."""
    f = c.fusion
    weights = weights or f.weights_of(name)
    method = FUSED_METHODS[name]
    return FusedRetriever(
        name,
        weights,
        _bm25(c, f.tokenizer),
        _chunked(c),
        f.metadata,
        f.dense_candidates,
        f.candidates,
        method.company_free,
        method.prefer_held,
    )


RETRIEVERS: dict[str, Callable[[RetrievalConfig], Retriever]] = {
    "bm25": _bm25,
    "base": _dense,
    "hybrid_bm25": lambda c: HybridBM25Retriever(_dense(c), _bm25(c), c.hybrid.alpha, c.hybrid.beta),
    "hybrid_rrf": lambda c: HybridRRFRetriever(_dense(c), _bm25(c), c.hybrid.rrf_k, c.hybrid.rrf_candidates),
    "bm25_numeric": lambda c: _bm25(c, "numeric"),
    "chunked": _chunked,
    **{name: partial(fused_retriever, name) for name in FUSED_METHODS},
}


def build_retriever(name: str, config: RetrievalConfig | None = None) -> Retriever:
    """A fresh, unindexed retriever by registry name."""
    try:
        factory = RETRIEVERS[name]
    except KeyError:
        raise ValueError(f"unknown retriever '{name}' (choose from {', '.join(RETRIEVERS)})") from None
    config = config or RetrievalConfig()
    if config.holds_every_shard:
        return ShardedRetriever(lambda: factory(config), config.shards)
    return factory(config)
