"""Weighted fusion of text scores with the metadata prior and page evidence: BM25, dense (chunked or not), company
and year match, and what a page's table and text name.

Every component is a (questions x documents) matrix in [0, 1]:
- `lexical`: BM25 divided by the question's best BM25 score;
- `dense`: the dense top-`dense_candidates` list min-max scaled (its last context gets 0, as do contexts outside
  it);
- `company`, `year`, `year_before`: the metadata prior's features (`t2rag.retrieval.metadata_prior`);
- `row_words`, `line_item`, `phrases`, `numbers`: page evidence (`t2rag.retrieval.page_evidence`).

A context's score is the weighted sum; ties fall to corpus order. The
weights are fitted on a dev split by `t2rag fit-fusion` (`t2rag.fusion_fit`) and written into a config; a component
with weight 0 is not computed. Every search scores all documents of the corpus, a few questions at a time so the
score matrices stay within `FUSION_BYTES`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import DensePassages, Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.bm25 import BM25Retriever
from t2rag.retrieval.dense import DenseRetriever
from t2rag.retrieval.metadata_prior import FEATURES, MetadataColumns, MetadataPrior
from t2rag.retrieval.page_evidence import PAGE_FEATURES, PageEvidence
from t2rag.retrieval.ranking import top_n

COMPONENTS: tuple[str, ...] = ("lexical", "dense", *FEATURES, *PAGE_FEATURES)
#: Score memory a search holds at once, and what one (question, document) pair takes of it: every component, the
#: fused float64 score and the selection's temporaries.
FUSION_BYTES = 512 << 20
BYTES_PER_SCORE = 64


class FusionWeights(BaseModel):
    """The weight of every fused component (0: left out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lexical: float = Field(1.0, ge=0)
    dense: float = Field(0.0, ge=0)
    company: float = Field(0.0, ge=0)
    year: float = Field(0.0, ge=0)
    year_before: float = Field(0.0, ge=0)
    row_words: float = Field(0.0, ge=0)
    line_item: float = Field(0.0, ge=0)
    phrases: float = Field(0.0, ge=0)
    numbers: float = Field(0.0, ge=0)

    def used(self) -> tuple[str, ...]:
        return tuple(c for c in COMPONENTS if getattr(self, c) > 0)


#: The fused retrievers and the components each one fuses.
FUSED_COMPONENTS: dict[str, tuple[str, ...]] = {
    "bm25_meta": ("lexical", *FEATURES),
    "bm25_page": ("lexical", *FEATURES, *PAGE_FEATURES),
    "hybrid_chunked": ("lexical", "dense"),
    "hybrid_meta": ("lexical", "dense", *FEATURES),
}

#: The fused retrievers' weights, as `t2rag fit-fusion` fitted them on the bundled dev sample (see
#: configs/best_retrieval.yaml for the command); a config's `retrieval.fusion.weights` replaces them.
FITTED_WEIGHTS: dict[str, FusionWeights] = {
    "bm25_meta": FusionWeights(lexical=1.0, company=0.585, year=0.237, year_before=0.101),
    "bm25_page": FusionWeights(
        lexical=1.0,
        company=1.032,
        year=0.453,
        year_before=0.165,
        row_words=0.248,
        line_item=0.407,
        phrases=0.991,
        numbers=0.389,
    ),
    "hybrid_chunked": FusionWeights(lexical=1.0, dense=0.309),
    "hybrid_meta": FusionWeights(lexical=1.0, dense=0.466, company=0.829, year=0.347, year_before=0.131),
}


class FusionConfig(BaseModel):
    """The fused retrievers' weights, the BM25 tokenizer they use and how long a dense list they fuse."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: dict[str, FusionWeights] = Field(default_factory=lambda: dict(FITTED_WEIGHTS))
    tokenizer: str = "numeric"
    dense_candidates: int = Field(100, ge=1)
    metadata: MetadataColumns = MetadataColumns()

    @model_validator(mode="after")
    def _known(self) -> FusionConfig:
        for name, weights in self.weights.items():
            if name not in FUSED_COMPONENTS:
                raise ValueError(f"fusion weights for unknown retriever '{name}' (fused: {sorted(FUSED_COMPONENTS)})")
            stray = [c for c in weights.used() if c not in FUSED_COMPONENTS[name]]
            if stray:
                raise ValueError(f"{name} fuses {list(FUSED_COMPONENTS[name])}, not {stray}")
        return self

    def weights_of(self, name: str) -> FusionWeights:
        return self.weights.get(name, FITTED_WEIGHTS[name])


class FusedRetriever(IndexedMixin, Retriever):
    """A registered fusion (`name`) of a lexical and/or a dense retriever with the corpus's metadata prior."""

    def __init__(
        self,
        name: str,
        weights: FusionWeights,
        lexical: BM25Retriever | None = None,
        dense: DenseRetriever | None = None,
        metadata: MetadataColumns | None = None,
        dense_candidates: int = 100,
    ):
        self.name = name
        self.weights = weights
        self.lexical = lexical if weights.lexical > 0 else None
        self.dense = dense if weights.dense > 0 else None
        self.metadata = metadata if any(getattr(weights, f) > 0 for f in FEATURES) else None
        self.dense_candidates = dense_candidates
        self.needs_query_vectors = self.dense is not None
        self.prior: MetadataPrior | None = None
        self.page: PageEvidence | None = None

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self._corpus = corpus
        if self.lexical is not None:
            self.lexical.index(corpus)
        if self.dense is not None:
            self.dense.index(corpus, vectors)
        if self.metadata is not None:
            self.prior = MetadataPrior(corpus, self.metadata)
        if any(getattr(self.weights, f) > 0 for f in PAGE_FEATURES):
            self.page = PageEvidence(corpus.texts)

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        return self.dense.dense_passages(corpus) if self.dense is not None else []

    @property
    def index_info(self) -> dict:
        return getattr(self.dense, "index_info", {}) if self.dense is not None else {}

    def components(self, queries: Sequence[str] | QueryBlock) -> dict[str, np.ndarray]:
        """Every used component as a separate (questions x documents) matrix in [0, 1] (for fitting weights)."""
        block = as_block(queries)
        out: dict[str, np.ndarray] = {}
        if self.lexical is not None:
            out["lexical"] = self._lexical(block)
        if self.dense is not None:
            out["dense"] = np.zeros((len(block), len(self.corpus)))
            self._add_dense(out["dense"], block, 1.0)
        if self.prior is not None:
            out.update(self.prior.features(block.texts))
        if self.page is not None:
            out.update(self.page.features(block.texts))
        return out

    def fused_scores(self, queries: Sequence[str] | QueryBlock) -> np.ndarray:
        """(questions x documents) weighted sum of the components, made in place in one float64 matrix."""
        block = as_block(queries)
        w = self.weights
        if self.lexical is not None:
            fused = self._lexical(block)
            fused *= w.lexical
        else:
            fused = np.zeros((len(block), len(self.corpus)))
        if self.dense is not None:
            self._add_dense(fused, block, w.dense)
        if self.prior is not None:
            fused += self.prior.weighted(block.texts, {f: getattr(w, f) for f in FEATURES})
        if self.page is not None:
            fused += self.page.weighted(block.texts, {f: getattr(w, f) for f in PAGE_FEATURES})
        return fused

    def _lexical(self, block: QueryBlock) -> np.ndarray:
        scores = self.lexical.scores(block.texts)
        best = scores.max(axis=1, keepdims=True) if scores.shape[1] else np.zeros((len(block), 1))
        scores /= np.where(best > 0, best, 1.0)  # BM25 is never negative: a row without a match stays 0
        return scores

    def _add_dense(self, out: np.ndarray, block: QueryBlock, weight: float) -> None:
        hits = self.dense.search_vectors(self.dense.query_vectors(block), min(self.dense_candidates, out.shape[1]))
        rows, cols = np.nonzero(hits.indices >= 0)
        out[rows, hits.indices[rows, cols]] += weight * scaled_list(hits)[rows, cols]

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        """Fused top results (ties: corpus order), a few questions at a time so memory stays within FUSION_BYTES at
        any corpus size. The blocks run one after another: most of a block's time is Python holding the GIL (a
        second thread made the bm25_meta and bm25_page searches 1.4-1.8x slower on 2 cores)."""
        block = as_block(queries)
        n = result_depth(k, depth)
        step = max(1, FUSION_BYTES // (BYTES_PER_SCORE * max(len(self.corpus), 1)))
        spans = [block.slice(s, s + step) for s in range(0, len(block), step)]
        if not spans:
            return Hits(np.zeros((0, n), np.int64), np.zeros((0, n)))
        parts = [Hits(*top_n(self.fused_scores(span), n)) for span in spans]
        return Hits(np.concatenate([p.indices for p in parts]), np.concatenate([p.scores for p in parts]))


def scaled_list(hits: Hits) -> np.ndarray:
    """Each listed context's score min-max scaled within its question's list (the last one 0; NaN where empty)."""
    valid = hits.indices >= 0
    low = np.min(np.where(valid, hits.scores, np.inf), axis=1, keepdims=True)
    high = np.max(np.where(valid, hits.scores, -np.inf), axis=1, keepdims=True)
    return (hits.scores - low) / np.where(high > low, high - low, 1.0)
