"""Typed retrieval settings and the registry that turns a retriever name into an object."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from t2rag import plugins
from t2rag.errors import PluginError
from t2rag.retrieval.base import Retriever
from t2rag.retrieval.checked import CheckedRetriever, PassageVectors
from t2rag.retrieval.dense.chunked import ChunkedDenseRetriever
from t2rag.retrieval.dense.chunking import ChunkingConfig
from t2rag.retrieval.dense.embedder import EmbedderConfig
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.dense.vector_store import AnnConfig
from t2rag.retrieval.fusion.hybrid import HybridBM25Retriever
from t2rag.retrieval.fusion.reciprocal import RankFusionRetriever
from t2rag.retrieval.fusion.weighted import FUSED_METHODS, FusedRetriever, FusionConfig, FusionWeights
from t2rag.retrieval.lexical.bm25 import BM25Retriever
from t2rag.retrieval.metadata_prior import FEATURES
from t2rag.retrieval.page_evidence.features import PAGE_FEATURES
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


#: What a registered retriever combines, in the order the report's ablation table shows them: BM25 (`lexical`), its
#: numeric tokenizer, the metadata prior, page evidence, BM25 without the company's name, a dense encoder, chunks.
INGREDIENTS: tuple[str, ...] = ("lexical", "numeric", "metadata", "page", "company-free", "dense", "chunks")


#: The settings blocks of a run (`settings:` in its config), by the registered name they configure.
Settings = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class RegisteredRetriever:
    """A retriever the registry builds by name (`build(retrieval settings, the run's plugin settings)`), and what
    it combines (`INGREDIENTS`)."""

    build: Callable[[RetrievalConfig, Settings], Retriever]
    ingredients: tuple[str, ...]
    #: The pydantic model of its block under the run config's `settings:` (plugins only; None: it takes none).
    settings: type[BaseModel] | None = None
    #: The retrievers a rank fusion fuses.
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetrieverPlugin:
    """A retriever from outside t2rag, as a plugin registers it: `build(settings)` returns a fresh, unindexed
    `Retriever` (`build()` when it declares no `settings`, the pydantic model of its block under the run config's
    `settings:`)."""

    build: Callable[..., Retriever]
    settings: type[BaseModel] | None = None
    description: str = ""
    #: It searches with dense vectors: each block's `QueryBlock.vectors` holds the questions' embeddings and
    #: `index(corpus, vectors)` gets the passages' (the run's embedder, cached as the built-ins' are); its methods
    #: embed the question first (`DENSE`, not `LEXICAL`).
    needs_query_vectors: bool = False


@dataclass(frozen=True)
class RankFusion:
    """A retriever and a method of one name: reciprocal-rank fusion of registered retrievers (a run config's
    `rank_fusion:` entry, or a plugin's method)."""

    name: str
    retrievers: tuple[str, ...]
    k_rrf: int = 60
    candidates: int = 50
    description: str = ""


def _plain(build: Callable[[RetrievalConfig], Retriever]) -> Callable[[RetrievalConfig, Settings], Retriever]:
    return lambda config, settings: build(config)


def _fused_ingredients(name: str) -> tuple[str, ...]:
    """A fused retriever's ingredients, read off its components (the fusion's BM25 tokenizer is numeric)."""
    method, parts = FUSED_METHODS[name], set(FUSED_METHODS[name].components)
    has = {
        "lexical": "lexical" in parts,
        "numeric": "lexical" in parts and FusionConfig().tokenizer == "numeric",
        "metadata": bool(parts & set(FEATURES)),
        "page": bool(parts & set(PAGE_FEATURES)),
        "company-free": method.company_free,
        "dense": "dense" in parts,
        "chunks": "dense" in parts,  # the fused dense component is the chunked retriever
    }
    return tuple(i for i in INGREDIENTS if has[i])


RETRIEVERS: dict[str, RegisteredRetriever] = {
    name: RegisteredRetriever(_plain(build), ingredients)
    for name, build, ingredients in [
        ("bm25", _bm25, ("lexical",)),
        ("base", _dense, ("dense",)),
        ("hybrid_bm25", lambda c: HybridBM25Retriever(_dense(c), _bm25(c), c.hybrid.alpha, c.hybrid.beta),
         ("lexical", "dense")),
        ("hybrid_rrf",
         lambda c: RankFusionRetriever("hybrid_rrf", [_dense(c), _bm25(c)], c.hybrid.rrf_k, c.hybrid.rrf_candidates),
         ("lexical", "dense")),
        ("bm25_numeric", lambda c: _bm25(c, "numeric"), ("lexical", "numeric")),
        ("chunked", _chunked, ("dense", "chunks")),
        *((name, partial(fused_retriever, name), _fused_ingredients(name)) for name in FUSED_METHODS),
    ]
}  # fmt: skip


def register_retriever(name: str, entry: RetrieverPlugin | RankFusion, origin: plugins.Origin) -> None:
    """A plugin's retriever (checked on every block it returns) or a rank fusion of registered retrievers."""
    if isinstance(entry, RankFusion):
        unknown = [m for m in entry.retrievers if m not in RETRIEVERS]
        if unknown:
            raise PluginError(f"plugin {origin.label}: rank fusion '{name}' fuses unknown retriever(s) {unknown} "
                              f"(retrievers: {', '.join(RETRIEVERS)})")  # fmt: skip
        members, k_rrf, candidates = entry.retrievers, entry.k_rrf, entry.candidates
        RETRIEVERS[name] = RegisteredRetriever(
            lambda c, s: RankFusionRetriever(name, [build_retriever(m, c, s) for m in members], k_rrf, candidates),
            tuple(i for i in INGREDIENTS if any(i in RETRIEVERS[m].ingredients for m in members)),
            members=members,
        )
        return
    if not isinstance(entry, RetrieverPlugin):
        raise PluginError(f"plugin {origin.label}: retriever '{name}' is a {type(entry).__name__}, not a "
                          "t2rag.extend.RetrieverPlugin")  # fmt: skip

    def build(config: RetrievalConfig, settings: Settings) -> Retriever:
        made = (
            entry.build()
            if entry.settings is None
            else entry.build(plugins.validated_settings(name, entry.settings, settings))
        )
        passages = PassageVectors(config.embedder, config.index_uri, config.ann) if entry.needs_query_vectors else None
        return CheckedRetriever(made, name, plugins.origin_of("t2rag.retrievers", name).label, passages)

    RETRIEVERS[name] = RegisteredRetriever(build, ("dense",) if entry.needs_query_vectors else (), entry.settings)


plugins.add_registrar(
    "t2rag.retrievers",
    plugins.Registrar(
        register_retriever, lambda: RETRIEVERS, lambda n: RETRIEVERS[n].settings if n in RETRIEVERS else None
    ),
)


def ablation_ladder() -> dict[str, tuple[str, ...]]:
    """Every built-in retriever and its ingredients, lexical ones first and each kind from the fewest
    ingredients up (dense alone before dense with BM25)."""

    def rung(name: str) -> tuple[bool, bool, int]:
        got = RETRIEVERS[name].ingredients
        return "dense" in got, "dense" in got and "lexical" in got, len(got)

    built_in = [name for name in RETRIEVERS if plugins.origin_of("t2rag.retrievers", name).built_in]
    return {name: RETRIEVERS[name].ingredients for name in sorted(built_in, key=rung)}


def build_retriever(name: str, config: RetrievalConfig | None = None, settings: Settings | None = None) -> Retriever:
    """A fresh, unindexed retriever by registry name; `settings` are the run's plugin settings blocks."""
    try:
        factory = RETRIEVERS[name].build
    except KeyError:
        raise ValueError(f"unknown retriever '{name}' (choose from {', '.join(RETRIEVERS)})") from None
    config, settings = config or RetrievalConfig(), settings or {}
    if config.holds_every_shard:
        return ShardedRetriever(lambda: factory(config, settings), config.shards)
    return factory(config, settings)
