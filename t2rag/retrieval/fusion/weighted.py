"""Weighted fusion of text scores with the metadata prior and page evidence: BM25, dense (chunked or not), company
and year match, and what a page's table and text name.

Every component is a (questions x documents) matrix in [0, 1]:
- `lexical`: BM25 divided by the question's best BM25 score;
- `dense`: the dense top-`dense_candidates` list min-max scaled (its last context gets 0, as do contexts outside
  it);
- `company`, `year`, `year_before`, `report_named`: the metadata prior's features (`t2rag.retrieval.metadata_prior`);
- `row_words`, `line_item`, `phrases`, `triples`, `numbers`, `row_years`, `passage`: page evidence
  (`t2rag.retrieval.page_evidence.features`).

A context's score is the weighted sum; ties fall to corpus order. The weights are fitted on a dev split by `t2rag
fit-fusion` (`t2rag.retrieval.fusion.fit`) and written into a config; a component with weight 0 is not computed. A
search runs in stages: every component but the word pairs and figures scores every document of the corpus (a few
questions at a time, so the score matrices stay within `FUSION_BYTES`); the word pairs, triples and figures are added
for the first stage's best `candidates` documents only; and `passage`, which finds every word of the question in a
document (the costliest lookup), for the second stage's best `PASSAGE_DEPTH`; then they are ranked. The later stages
cost the same per question at any corpus size. On the dev sample, no gold context that every document scored in full
would rank in the top 3 falls outside 50 candidates (the largest first-stage rank of such a gold is 17;
`tests/retrieval/fusion/test_weighted.py`). A method that reads the question `company_free` scores BM25 without the
words naming its company (`MetadataPrior.company_words`): the prior scores the company, and a name in the lexical score
favours the pages that print it, which grow in number with the corpus. A method that `prefer_held` then moves a page
that a longer page of its report holds whole above that page, where the longer one adds no page evidence
(`t2rag.retrieval.contained_pages`)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import sparse

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import DensePassages, Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.contained_pages import DEPTH, ContainedPages
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.lexical.bm25 import BM25Retriever
from t2rag.retrieval.metadata_prior import FEATURES, DocumentMetadata, MetadataColumns, MetadataPrior
from t2rag.retrieval.page_evidence.features import (
    CANDIDATE_FEATURES,
    FIRST_PAGE_FEATURES,
    PAGE_FEATURES,
    Asked,
    PageEvidence,
    line_item_best,
    scale_line_item,
)
from t2rag.retrieval.ranking import top_n
from t2rag.retrieval.years import years_named

COMPONENTS: tuple[str, ...] = ("lexical", "dense", *FEATURES, *PAGE_FEATURES)
#: The prior's features of the first fused methods (before `report_named`).
PRIOR: tuple[str, ...] = ("company", "year", "year_before")
#: Score memory a search holds at once, and what one (question, document) pair takes of it: every component, the
#: fused float64 score and the selection's temporaries.
FUSION_BYTES = 512 << 20
BYTES_PER_SCORE = 64
#: Documents per question, the second stage's best, that `passage` scores (the third stage).
PASSAGE_DEPTH = 6
#: The candidate features added in the third stage.
THIRD_STAGE: tuple[str, ...] = ("passage",)
#: Threads a search's spans run in, each holding its share of FUSION_BYTES (as many as BM25's `top_k` uses).
SEARCH_THREADS = 2


class FusionWeights(BaseModel):
    """The weight of every fused component (0: left out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lexical: float = Field(1.0, ge=0)
    dense: float = Field(0.0, ge=0)
    company: float = Field(0.0, ge=0)
    year: float = Field(0.0, ge=0)
    year_before: float = Field(0.0, ge=0)
    report_named: float = Field(0.0, ge=0)
    row_words: float = Field(0.0, ge=0)
    line_item: float = Field(0.0, ge=0)
    phrases: float = Field(0.0, ge=0)
    triples: float = Field(0.0, ge=0)
    numbers: float = Field(0.0, ge=0)
    row_years: float = Field(0.0, ge=0)
    passage: float = Field(0.0, ge=0)

    def used(self) -> tuple[str, ...]:
        return tuple(c for c in COMPONENTS if getattr(self, c) > 0)


@dataclass(frozen=True)
class Reading:
    """What a fused retriever's components read of a block of questions (`FusedRetriever.read`)."""

    match: np.ndarray | None  # (questions x companies) name match, when the prior is used
    left_out: list[frozenset[str]] | None  # per question, the words BM25 leaves out (`company_free`)
    asked: Asked | None  # what page evidence reads, when it is used
    years: list[frozenset[int]] | None  # the years each question names, when the prior or page evidence is used


@dataclass(frozen=True)
class FusedMethod:
    """What a fused retriever sums, whether its lexical feature reads the question without its company's name, and
    whether it prefers a page that another page of its report holds whole (`t2rag.retrieval.contained_pages`)."""

    components: tuple[str, ...]
    company_free: bool = False
    prefer_held: bool = False


#: bm25_focus's page features: runs of three words and the share of row-label words weighed next to nothing once
#: `passage` read where the question's words stand (refitted with both, 2026-12-06), and leaving them out paid for it.
FOCUS_PAGE_FEATURES: tuple[str, ...] = tuple(f for f in PAGE_FEATURES if f not in ("triples", "row_words"))

#: The fused retrievers, in the order `t2rag fit-fusion` fits and reports them.
FUSED_METHODS: dict[str, FusedMethod] = {
    "bm25_meta": FusedMethod(("lexical", *PRIOR)),
    "bm25_page": FusedMethod(("lexical", *PRIOR, *FIRST_PAGE_FEATURES)),
    "bm25_focus": FusedMethod(("lexical", *FEATURES, *FOCUS_PAGE_FEATURES), company_free=True, prefer_held=True),
    "hybrid_chunked": FusedMethod(("lexical", "dense")),
    "hybrid_meta": FusedMethod(("lexical", "dense", *PRIOR)),
}

#: The fused retrievers' weights, as `t2rag fit-fusion` fitted them on the bundled dev sample (see
#: configs/best_retrieval.yaml for the command); a config's `retrieval.fusion.weights` replaces them.
FITTED_WEIGHTS: dict[str, FusionWeights] = {
    "bm25_meta": FusionWeights(lexical=1.0, company=0.585, year=0.237, year_before=0.101),
    "bm25_page": FusionWeights(
        lexical=1.0,
        company=1.061,
        year=0.468,
        year_before=0.166,
        row_words=0.241,
        line_item=0.426,
        phrases=1.055,
        numbers=0.401,
    ),
    "bm25_focus": FusionWeights(
        lexical=1.0,
        company=1.233,
        year=0.453,
        year_before=0.143,
        report_named=0.211,
        line_item=0.299,
        phrases=0.888,
        numbers=0.422,
        row_years=0.33,
        passage=0.903,
    ),
    "hybrid_chunked": FusionWeights(lexical=1.0, dense=0.309),
    "hybrid_meta": FusionWeights(lexical=1.0, dense=0.466, company=0.829, year=0.347, year_before=0.131),
}


class FusionConfig(BaseModel):
    """The fused retrievers' weights, the BM25 tokenizer they use, how long a dense list they fuse and how many
    contexts their second stage scores."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: dict[str, FusionWeights] = Field(default_factory=lambda: dict(FITTED_WEIGHTS))
    tokenizer: str = "numeric"
    dense_candidates: int = Field(100, ge=1)
    #: Documents per question, the first stage's best, that the word-pair, triple and figure features score.
    candidates: int = Field(50, ge=1)
    metadata: MetadataColumns = MetadataColumns()

    @model_validator(mode="after")
    def _known(self) -> FusionConfig:
        for name, weights in self.weights.items():
            if name not in FUSED_METHODS:
                raise ValueError(f"fusion weights for unknown retriever '{name}' (fused: {sorted(FUSED_METHODS)})")
            fuses = FUSED_METHODS[name].components
            stray = [c for c in weights.used() if c not in fuses]
            if stray:
                raise ValueError(f"{name} fuses {list(fuses)}, not {stray}")
        return self

    def weights_of(self, name: str) -> FusionWeights:
        return self.weights.get(name, FITTED_WEIGHTS[name])


class FusedRetriever(IndexedMixin, Retriever):
    """A registered fusion (`name`) of a lexical and/or a dense retriever with the corpus's metadata prior and page
    evidence."""

    def __init__(
        self,
        name: str,
        weights: FusionWeights,
        lexical: BM25Retriever | None = None,
        dense: DenseRetriever | None = None,
        metadata: MetadataColumns | None = None,
        dense_candidates: int = 100,
        candidates: int = 50,
        company_free: bool = False,
        prefer_held: bool = False,
    ):
        self.name = name
        self.weights = weights
        self.lexical = lexical if weights.lexical > 0 else None
        self.dense = dense if weights.dense > 0 else None
        self.company_free = company_free
        wants_prior = any(getattr(weights, f) > 0 for f in FEATURES) or company_free
        self.metadata = metadata if wants_prior else None
        self.prefer_held = prefer_held and self.metadata is not None and self.reads_pages
        self.dense_candidates = dense_candidates
        self.candidates = candidates
        self.needs_query_vectors = self.dense is not None
        self.prior: MetadataPrior | None = None
        self.page: PageEvidence | None = None
        self.contained: ContainedPages | None = None

    def index(self, corpus: Corpus, vectors: np.ndarray | None = None) -> None:
        self._corpus = corpus
        if self.lexical is not None:
            self.lexical.index(corpus)
        if self.dense is not None:
            self.dense.index(corpus, vectors)
        if self.metadata is not None:
            self.prior = MetadataPrior(corpus, self.metadata)
        if self.reads_pages:
            self.page = PageEvidence(corpus.texts)
        if self.prefer_held:
            reports = DocumentMetadata.of(corpus, self.metadata)
            self.contained = ContainedPages.of(corpus.texts, reports.names, reports.years)

    @property
    def reads_pages(self) -> bool:
        """Whether a page-evidence component is weighted."""
        return any(getattr(self.weights, f) > 0 for f in PAGE_FEATURES)

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        return self.dense.dense_passages(corpus) if self.dense is not None else []

    @property
    def index_info(self) -> dict:
        return getattr(self.dense, "index_info", {}) if self.dense is not None else {}

    def read(self, questions: Sequence[str]) -> Reading:
        """What every component reads of a block of questions, made once: their company match, the words BM25
        leaves out of each (its company's name when `company_free`), what page evidence reads and the years each
        names."""
        match = self.prior.entity_match(questions) if self.prior is not None else None
        left_out = None
        if self.company_free and self.prior is not None:
            left_out = self.prior.company_words(questions, match)
        years = [years_named(q) for q in questions] if self.prior is not None or self.page is not None else None
        asked = None
        if self.page is not None:
            asked = self.page.asked(
                questions, years, left_out, [f for f in PAGE_FEATURES if getattr(self.weights, f) > 0]
            )
        return Reading(match, left_out, asked, years)

    def components(self, queries: Sequence[str] | QueryBlock) -> dict[str, np.ndarray]:
        """Every used component as a separate (questions x documents) matrix in [0, 1], every document scored by
        every component (for fitting weights)."""
        block = as_block(queries)
        reading = self.read(block.texts)
        out: dict[str, np.ndarray] = {}
        if self.lexical is not None:
            out["lexical"] = self._lexical(block.texts, reading.left_out, 1.0)
        if self.dense is not None:
            out["dense"] = np.zeros((len(block), len(self.corpus)))
            self._add_dense(out["dense"], block, 1.0)
        if self.prior is not None:
            features = self.prior.features(block.texts, reading.match, reading.years)
            out.update({f: v for f, v in features.items() if getattr(self.weights, f) > 0})
        if reading.asked is not None:
            out.update(self.page.features(reading.asked))
        return {f: v for f, v in out.items() if getattr(self.weights, f) > 0}

    def fused_scores(self, queries: Sequence[str] | QueryBlock) -> np.ndarray:
        """(questions x documents) weighted sum of the components, every document scored by every component."""
        block = as_block(queries)
        reading = self.read(block.texts)
        fused = self._first_stage(block, reading)
        if self._second_stage_weights():
            fused += self.second_stage(reading.asked, self._every_document(len(block)))
        return fused

    def _first_stage(self, block: QueryBlock, reading: Reading) -> np.ndarray:
        """(questions x documents) float64: the weighted sum of every component the whole corpus is scored by."""
        parts = self.first_stage_parts(block, reading)
        return parts.combine(self.weights, *parts.maxima(), in_place=True)

    def first_stage_parts(self, block: QueryBlock, reading: Reading) -> FirstStage:
        """The first stage's components of a block, before the two that are scaled by a question's best document
        (BM25 and the line-item mass) are scaled."""
        w = self.weights
        dense = None
        if self.dense is not None:
            dense = np.zeros((len(block), len(self.corpus)))
            self._add_dense(dense, block, w.dense)
        prior = None
        if self.prior is not None:
            prior = self.prior.weighted(block.texts, {f: getattr(w, f) for f in FEATURES}, reading.match, reading.years)
        row_words = item_mass = None
        if reading.asked is not None:
            in_labels = reading.asked.in_labels
            if w.row_words > 0:
                row_words = self.page.row_words.share(in_labels)
            if w.line_item > 0:
                item_mass = self.page.line_item_mass(reading.asked.named)
        lexical = self.lexical.scores(block.texts, reading.left_out) if self.lexical is not None else None
        return FirstStage(len(block), len(self.corpus), lexical, dense, prior, row_words, item_mass)

    def _second_stage_weights(self) -> dict[str, float]:
        """The weighted candidate features, those of the third stage included."""
        if self.page is None:
            return {}
        return {f: getattr(self.weights, f) for f in CANDIDATE_FEATURES if getattr(self.weights, f) > 0}

    def second_stage(self, asked: Asked | None, docs: np.ndarray) -> np.ndarray:
        """The weighted candidate features of the documents `docs` ((questions x candidates) positions), the third
        stage's too (0 when no candidate feature is weighted)."""
        return self._weighted(self.second_stage_features(asked, docs), docs.shape)

    def second_stage_features(self, asked: Asked | None, docs: np.ndarray, third: bool = True) -> dict[str, np.ndarray]:
        """Each weighted candidate feature of the documents `docs` ((questions x candidates) positions), those of
        the third stage left out unless `third`."""
        weights = [f for f in self._second_stage_weights() if third or f not in THIRD_STAGE]
        if not weights:
            return {}
        return self.page.candidate_features(asked, docs, tuple(weights))

    def weighted_second_stage(self, features: dict[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        """The second stage's score from its features, the third stage's left out (0 when none is weighted)."""
        return self._weighted({f: v for f, v in features.items() if f not in THIRD_STAGE}, shape)

    def weighted_third_stage(self, features: dict[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        """The third stage's score from its features (0 when none is weighted)."""
        return self._weighted({f: v for f, v in features.items() if f in THIRD_STAGE}, shape)

    def _weighted(self, features: dict[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        if not features:
            return np.zeros(shape)
        return sum(getattr(self.weights, f) * values.astype(np.float64) for f, values in features.items())

    def third_stage(
        self, asked: Asked | None, positions: np.ndarray, scores: np.ndarray, features: dict[str, np.ndarray]
    ) -> np.ndarray:
        """The second stage's `scores` of the documents `positions` with the third stage added to each question's
        best PASSAGE_DEPTH of them (ties: corpus order). Its features are read from `features` where they are
        there (a shard's, of every candidate) and otherwise computed for those documents alone and put in
        `features` (0 for the others)."""
        weighted = [f for f in THIRD_STAGE if getattr(self.weights, f) > 0]  # a merge's retriever holds no index
        if not weighted:
            return scores
        best = np.lexsort((positions, -scores), axis=-1)[:, :PASSAGE_DEPTH]
        rows = np.arange(len(scores))[:, None]
        missing = [f for f in weighted if f not in features]
        if missing:
            found = self.page.candidate_features(asked, positions[rows, best], tuple(missing))
            for f in missing:
                features[f] = np.zeros(positions.shape, np.float32)
                features[f][rows, best] = found[f]
        added = np.zeros(scores.shape)
        added[rows, best] = self.weighted_third_stage({f: features[f][rows, best] for f in weighted}, best.shape)
        return scores + added

    def _every_document(self, questions: int) -> np.ndarray:
        return np.broadcast_to(np.arange(len(self.corpus)), (questions, len(self.corpus)))

    def _lexical(self, texts: list[str], left_out: list[frozenset[str]] | None, weight: float) -> np.ndarray:
        """BM25 over the question's best BM25 score, times `weight` (in one pass over the matrix)."""
        scores = self.lexical.scores(texts, left_out)
        return scale_lexical(scores, lexical_best(scores), weight, in_place=True)

    def _add_dense(self, out: np.ndarray, block: QueryBlock, weight: float) -> None:
        hits = self.dense.search_vectors(self.dense.query_vectors(block), min(self.dense_candidates, out.shape[1]))
        rows, cols = np.nonzero(hits.indices >= 0)
        out[rows, hits.indices[rows, cols]] += weight * scaled_list(hits)[rows, cols]

    def search(self, queries: Sequence[str] | QueryBlock, k: int, depth: int | None = None) -> Hits:
        """Fused top results (ties: corpus order), a few questions at a time so memory stays within FUSION_BYTES at
        any corpus size. Once a corpus needs more than one span, a span's time is mostly numpy's whole-corpus
        arithmetic, which releases the GIL, so spans run in SEARCH_THREADS threads, each within its share of
        FUSION_BYTES (at 100,000 contexts two threads take 1.2 s where one took 2.2 s; never slower at 10,000)."""
        block = as_block(queries)
        n = result_depth(k, depth)
        step = max(1, FUSION_BYTES // (SEARCH_THREADS * BYTES_PER_SCORE * max(len(self.corpus), 1)))
        spans = [block.slice(s, s + step) for s in range(0, len(block), step)]
        if not spans:
            return Hits(np.zeros((0, n), np.int64), np.zeros((0, n)))
        if SEARCH_THREADS > 1 and len(spans) > 1:
            with ThreadPoolExecutor(max_workers=SEARCH_THREADS, thread_name_prefix="fused") as pool:
                parts = list(pool.map(lambda span: self._search_span(span, n), spans))
        else:
            parts = [self._search_span(span, n) for span in spans]
        return Hits(np.concatenate([p.indices for p in parts]), np.concatenate([p.scores for p in parts]))

    def _search_span(self, block: QueryBlock, n: int) -> Hits:
        reading = self.read(block.texts)
        parts = self.first_stage_parts(block, reading)
        first = parts.combine(self.weights, *parts.maxima(), in_place=True)  # BM25's matrix becomes the score
        if not self._second_stage_weights():
            return Hits(*top_n(first, n))
        width = min(max(self.candidates, n), first.shape[1])
        chosen = (
            np.argpartition(-first, width - 1, axis=1)[:, :width]
            if width < first.shape[1]
            else self._every_document(len(block))
        )
        features = self.second_stage_features(reading.asked, chosen, third=False)
        scores = np.take_along_axis(first, chosen, axis=1) + self.weighted_second_stage(features, chosen.shape)
        scores = self.third_stage(reading.asked, chosen, scores, features)
        order = np.lexsort((chosen, -scores), axis=-1)[:, : min(n, width)]
        positions, scores = np.take_along_axis(chosen, order, axis=1), np.take_along_axis(scores, order, axis=1)
        if self.contained is not None:

            def evidence(row: int) -> np.ndarray:
                top = order[row, :DEPTH]
                return page_evidence_of(parts, features, row, positions[row, :DEPTH], top)

            positions, scores = self.contained.prefer_held(positions, scores, evidence)
        return Hits(positions, scores)


def page_evidence_of(
    stage: FirstStage, features: dict[str, np.ndarray], row: int, documents: np.ndarray, columns: np.ndarray
) -> np.ndarray:
    """A question's page-evidence components (its row-word share, line-item mass and weighted candidate features) of
    some of its candidates, as a (components x candidates) array: `documents` index the stage's documents and
    `columns` the features' candidates. The line-item mass is left unscaled: its scale is the question's alone."""
    parts = [stage.value(part, row, documents) for part in (stage.row_words, stage.item_mass) if part is not None]
    parts += [features[f][row, columns] for f in features]
    return np.array(parts, np.float64).reshape(len(parts), len(documents))


def scaled_list(hits: Hits) -> np.ndarray:
    """Each listed context's score min-max scaled within its question's list (the last one 0; NaN where empty)."""
    valid = hits.indices >= 0
    low = np.min(np.where(valid, hits.scores, np.inf), axis=1, keepdims=True)
    high = np.max(np.where(valid, hits.scores, -np.inf), axis=1, keepdims=True)
    return (hits.scores - low) / np.where(high > low, high - low, 1.0)


def lexical_best(scores: np.ndarray) -> np.ndarray:
    """Per question, its best BM25 score over the documents (0 where there are none)."""
    return scores.max(axis=1) if scores.shape[1] else np.zeros(len(scores))


def scale_lexical(scores: np.ndarray, best: np.ndarray, weight: float, in_place: bool = False) -> np.ndarray:
    """The `lexical` component times `weight`: BM25 over the question's best (a row without a match stays 0)."""
    factor = weight / np.where(best > 0, best, 1.0)[:, None]
    if in_place:
        scores *= factor
        return scores
    return scores * factor


@dataclass
class FirstStage:
    """A block's first-stage components over some documents (every document of an index, or chosen ones as dense
    (questions x documents) arrays): raw BM25, the weighted dense and prior scores, the row-word share and the
    line-item mass (sparse or dense, float32). BM25 and the line-item mass are scaled by each question's best over
    the whole corpus, which a shard does not know alone: `combine` takes those bests, so a shard's candidates are
    scored exactly as the unsharded index scores them once the shards' bests are merged."""

    questions: int
    documents: int
    lexical: np.ndarray | None
    dense: np.ndarray | None
    prior: np.ndarray | None
    row_words: np.ndarray | sparse.spmatrix | None
    item_mass: np.ndarray | sparse.spmatrix | None

    def maxima(self) -> tuple[np.ndarray, np.ndarray]:
        """Per question, the best BM25 score and the best line-item mass over these documents (an index's stage,
        whose line-item mass is sparse)."""
        lexical = lexical_best(self.lexical) if self.lexical is not None else np.zeros(self.questions)
        if self.item_mass is None:
            return lexical, np.zeros(self.questions, np.float32)
        return lexical, line_item_best(self.item_mass)

    def combine(
        self, weights: FusionWeights, best_lexical: np.ndarray, best_item: np.ndarray, in_place: bool = False
    ) -> np.ndarray:
        """(questions x documents) float64: the weighted first-stage score, BM25 and the line-item mass scaled by
        the bests given, added in one fixed order (the same float operations whoever calls it)."""
        if self.lexical is not None:
            fused = scale_lexical(self.lexical, best_lexical, weights.lexical, in_place)
        else:
            fused = np.zeros((self.questions, self.documents))
        for part in (self.dense, self.prior):
            if part is not None:
                fused += part
        if self.row_words is not None:
            _add(fused, self.row_words, weights.row_words)
        if self.item_mass is not None:
            if sparse.issparse(self.item_mass):
                mass = self.item_mass.tocoo()  # each cell once
                fused[mass.row, mass.col] += weights.line_item * scale_line_item(mass.data, best_item[mass.row])
            else:
                _add(fused, scale_line_item(self.item_mass, best_item[:, None]), weights.line_item)
        return fused

    @classmethod
    def joined(cls, parts: Sequence[FirstStage], axis: int) -> FirstStage:
        """Dense (gathered) stages joined: over questions (axis 0) or documents (axis 1)."""

        def join(values):
            return None if values[0] is None else np.concatenate(values, axis=axis)

        names = ("lexical", "dense", "prior", "row_words", "item_mass")
        joined = {name: join([getattr(p, name) for p in parts]) for name in names}
        questions = sum(p.questions for p in parts) if axis == 0 else parts[0].questions
        documents = parts[0].documents if axis == 0 else sum(p.documents for p in parts)
        return cls(questions, documents, **joined)

    def most_left_out(self, chosen: np.ndarray) -> FirstStage:
        """Per question, each component's largest value over the documents not in `chosen` ((questions x chosen)
        positions), as a stage of one document. Every component and weight is non-negative, so that document's
        `combine` bounds from above the score of every document left out, whatever bests it is scaled by."""
        left = np.ones((self.questions, self.documents), bool)
        np.put_along_axis(left, chosen, False, axis=1)

        def most(values):
            if values is None:
                return None
            dense = values.toarray() if sparse.issparse(values) else values
            return np.where(left, dense, 0).max(axis=1, keepdims=True, initial=0)

        parts = (self.lexical, self.dense, self.prior, self.row_words, self.item_mass)
        return FirstStage(self.questions, 1, *(most(p) for p in parts))

    @staticmethod
    def value(part: np.ndarray | sparse.spmatrix, row: int, documents: np.ndarray) -> np.ndarray:
        """One question's values of a component for some of the stage's documents."""
        if sparse.issparse(part):  # the row's cells read directly: scipy's fancy indexing costs far more
            rows = part.tocsr()
            cells = slice(rows.indptr[row], rows.indptr[row + 1])
            values = np.zeros(rows.shape[1])
            np.add.at(values, rows.indices[cells], rows.data[cells])
            return values[documents]
        return np.asarray(part[row, documents], np.float64)

    def gather(self, docs: np.ndarray) -> FirstStage:
        """The components of the documents `docs` ((questions x chosen) positions), as dense arrays."""

        def take(values):
            if values is None:
                return None
            if sparse.issparse(values):
                rows = np.arange(self.questions)[:, None]
                return np.asarray(values.tocsr()[rows, docs].todense(), dtype=np.float32)
            return np.take_along_axis(values, docs, axis=1)

        parts = (self.lexical, self.dense, self.prior, self.row_words, self.item_mass)
        return FirstStage(len(docs), docs.shape[1], *(take(p) for p in parts))


def _add(scores: np.ndarray, values: np.ndarray | sparse.spmatrix, weight: float) -> None:
    """Add `weight` times a float32 component where it is nonzero (a COO from CSR holds each cell once)."""
    if sparse.issparse(values):
        cells = values.tocoo()
        scores[cells.row, cells.col] += weight * cells.data
    else:
        scores += weight * values
