"""Link a question's text to the corpus's per-context metadata: a soft prior over documents, never a filter.

T2-RAGBench questions name their company and year ("... Citi's common stock ... 2017"), and every context carries
metadata (`company_name`, `company_symbol`, `report_year`). Names vary between the two ("Citi" / "Citigroup",
"Spirent Communications Plc" / "spirent-communications-plc", "Interpublic Group of Companies (The)"), and a question
may ask about one company inside another's report, so the match is a graded feature that fusion weighs
(`t2rag.retrieval.fusion.weighted`), not a hard filter.

Features per (question, document), all in [0, 1]:
- `company`: the share of a document's company-name tokens the question contains, each token weighted by its
  inverse frequency among the corpus's names (legal suffixes and case, punctuation and slug hyphens normalised
  away; a question token of 4+ letters also matches a name token it begins, so "Citi" matches "Citigroup"), or 1
  when the question contains the company's ticker symbol in capitals.
- `year`: the question mentions the document's report year; `year_before`: it mentions the year before (annual
  reports discuss last year's figures).
- `report_named`: the question names the document's report year as its report's ("in the 2019 report", "Republic
  Services' 2015 consolidated financial statements", "the 10-K for fiscal 2012"): on the dev sample 453 of the 462
  questions that do so name their gold context's report year, where a year named otherwise is the report's in 70%
  to 81% of questions.

`company_words` gives the words of a question that name the company it matches, for the lexical feature to leave
out: a name there sways it toward the pages that print it (the prior already scores the company).

Only corpus metadata is read; the question side is its text alone. Matching is vectorised: questions and names
become sparse token matrices and documents are grouped by their (company, year) pair, so the cost per question is
its tokens plus one gather over the documents.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy import sparse

from t2rag.data.corpus import Corpus
from t2rag.retrieval.years import YEAR, years_named

#: Words that name a legal form, taken out with a company's name when they follow it ("Spirent Communications Plc").
# fmt: off
LEGAL_FORMS = frozenset({
    "inc", "incorporated", "corp", "corporation", "co", "company", "companies", "plc", "ltd", "limited", "llc", "lp",
    "sa", "ag", "nv", "se", "group", "holdings", "holding",
})
#: Words that name a legal form or join a name ("Snap-on", "Jack in the Box"), not the company: dropped from names
#: before matching, since every question has them.
NAME_STOPWORDS = LEGAL_FORMS | frozenset({
    "the", "of", "and", "a", "an", "at", "by", "for", "in", "on", "to", "de", "du", "la", "le", "van", "von",
})
# fmt: on
#: Shortest question token that matches the name token it begins ("citi" -> "citigroup").
MIN_PREFIX = 4
FEATURES: tuple[str, ...] = ("company", "year", "year_before", "report_named")
#: A company matched at least this well (and best) has its name's words taken out (`company_words`).
NAMED_MATCH = 0.8

_WORD = re.compile(r"[a-z0-9]+(?:&[a-z0-9]+)*")
_SYMBOL = re.compile(r"\b[A-Z][A-Z.&]*[A-Z]\b")
#: A year named as its report's: "the 2019 (annual|financial) report", "2015 consolidated financial statements",
#: "2013 Form 10-K", or "the report/statements/10-K for (fiscal) (year) 2012".
_REPORT_YEAR = re.compile(
    r"\b((?:19|20)\d\d)(?:['’]s)?\s+(?:[\w-]+\s+){0,3}?(?:reports?|statements|filing|10-k|form)\b"
    r"|\b(?:report|statements|filing|10-k)\s+(?:\w+\s+){0,2}?(?:for|of)\s+(?:fiscal\s+)?(?:year\s+)?((?:19|20)\d\d)\b",
    re.IGNORECASE,
)


def name_tokens(name: str) -> list[str]:
    """A company name's distinctive tokens: lowercased, slug hyphens and punctuation split, legal forms dropped."""
    words = [w for w in _WORD.findall(name.lower().replace("'s", "")) if w not in NAME_STOPWORDS]
    return [w for w in words if len(w) > 1] or words


def question_tokens(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("'s", "")))


def named_report_years(text: str) -> set[int]:
    """The years a question names as its report's (see `report_named`)."""
    low = text.lower()
    # `_REPORT_YEAR` needs one of these words (in any case where the text is ASCII): most questions have none, and
    # the pattern costs a scan per year they name.
    hinted = "report" in low or "statements" in low or "filing" in low or "10-k" in low or "form" in low
    if not hinted and text.isascii():
        return set()
    return {int(a or b) for a, b in _REPORT_YEAR.findall(text)}


class MetadataColumns(BaseModel):
    """Which corpus metadata columns hold names, ticker symbols and years (the first non-empty one counts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    names: tuple[str, ...] = ("company_name",)
    symbols: tuple[str, ...] = ("company_symbol",)
    years: tuple[str, ...] = ("report_year",)


@dataclass(frozen=True)
class DocumentMetadata:
    """Per document, the first non-empty value of the name, symbol and year columns (None: none)."""

    names: tuple[str | None, ...]
    symbols: tuple[str | None, ...]
    years: tuple[str | None, ...]

    @classmethod
    def of(cls, corpus: Corpus, columns: MetadataColumns) -> DocumentMetadata:
        return cls(*(tuple(_first_present(corpus, c)) for c in (columns.names, columns.symbols, columns.years)))

    @classmethod
    def joined(cls, parts: Sequence[DocumentMetadata]) -> DocumentMetadata:
        """The metadata of consecutive pieces of one corpus, in corpus order."""
        return cls(*(tuple(v for p in parts for v in getattr(p, f)) for f in ("names", "symbols", "years")))


class MetadataPrior:
    """Fitted once on a corpus's metadata; `features(questions)` scores every document for every question."""

    def __init__(self, corpus: Corpus, columns: MetadataColumns | None = None):
        self._build(DocumentMetadata.of(corpus, columns or MetadataColumns()))

    @classmethod
    def of(cls, metadata: DocumentMetadata) -> MetadataPrior:
        """The prior of documents known by their metadata alone (a corpus too large to hold in one process)."""
        prior = cls.__new__(cls)
        prior._build(metadata)
        return prior

    def restricted(self, docs: range) -> MetadataPrior:
        """The prior of the documents `docs` alone (a shard), scoring them exactly as the whole corpus's does: the
        names' weights and the companies stay the whole corpus's."""
        part = copy.copy(self)
        part.n_docs = len(docs)
        part.doc_entity = self.doc_entity[docs.start : docs.stop]
        part.doc_year = self.doc_year[docs.start : docs.stop]
        part.doc_pair = self.doc_pair[docs.start : docs.stop]
        return part

    def _build(self, metadata: DocumentMetadata) -> None:
        self.n_docs = len(metadata.names)
        names = list(metadata.names)
        entities = sorted({n for n in names if n})
        entity_of = {name: i for i, name in enumerate(entities)}
        self.doc_entity = np.array([entity_of[n] if n else -1 for n in names], dtype=np.int64)
        self.vocab: dict[str, int] = {}
        rows, cols = [], []
        for e, name in enumerate(entities):
            for token in dict.fromkeys(name_tokens(name)):
                rows.append(e)
                cols.append(self.vocab.setdefault(token, len(self.vocab)))
        membership = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(entities), len(self.vocab)))
        df = np.asarray(membership.sum(axis=0)).ravel()
        weights = membership.multiply(np.log1p(len(entities) / np.maximum(df, 1))).tocsr()
        totals = np.asarray(weights.sum(axis=1)).ravel()
        #: (entities x name tokens): each name's token weights, summing to 1.
        self.name_weights = sparse.diags(1.0 / np.where(totals > 0, totals, 1.0)) @ weights
        self.prefixes: dict[str, list[int]] = {}
        for token, t in self.vocab.items():
            for end in range(MIN_PREFIX, len(token)):
                self.prefixes.setdefault(token[:end], []).append(t)
        #: Every question token that matches a name token: the token itself, or a prefix of MIN_PREFIX letters or more.
        self.token_matches: dict[str, tuple[int, ...]] = {
            token: tuple(
                dict.fromkeys([*([self.vocab[token]] if token in self.vocab else []), *self.prefixes.get(token, ())])
            )
            for token in {*self.vocab, *self.prefixes}
        }
        symbols = metadata.symbols
        self.symbol_entity: dict[str, int] = {}
        for name, symbol in zip(names, symbols, strict=True):
            if name and symbol and len(symbol) > 1:
                self.symbol_entity.setdefault(symbol, entity_of[name])
        #: Each company's words: its name's words, their prefixes of MIN_PREFIX letters or more, its ticker.
        self.entity_words: list[set[str]] = [
            {n[:end] for n in tokens for end in range(min(MIN_PREFIX, len(n)), len(n) + 1)}
            for tokens in (name_tokens(name) for name in entities)
        ]
        for symbol, e in self.symbol_entity.items():
            self.entity_words[e].add(symbol.lower())
        self._company_words: dict[tuple[int, ...], frozenset[str]] = {}  # per matched companies, on first use
        years = metadata.years
        self.doc_year = np.array([_year(y) for y in years], dtype=np.int64)
        # Documents grouped by (company, year): the prior is a function of the pair, so a search scores the pairs
        # and gathers once over the documents.
        pairs, inverse = np.unique(np.stack([self.doc_entity, self.doc_year], axis=1), axis=0, return_inverse=True)
        self.doc_pair = inverse.ravel()  # each document's pair
        self.pair_entity, self.pair_year = pairs[:, 0], pairs[:, 1]

    @property
    def empty(self) -> bool:
        """No usable metadata: every feature is zero and fusion falls back to the text scores."""
        return not (self.doc_entity >= 0).any() and not (self.doc_year >= 0).any()

    def entity_match(self, questions: Sequence[str]) -> np.ndarray:
        """(questions x entities) name match in [0, 1]."""
        rows, cols = [], []
        matches = self.token_matches
        for q, text in enumerate(questions):
            matched = {t for token in question_tokens(text) if token in matches for t in matches[token]}
            rows += [q] * len(matched)
            cols += matched
        present = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(questions), len(self.vocab)))
        match = np.asarray((present @ self.name_weights.T).todense()) if self.vocab else np.zeros((len(questions), 0))
        for q, text in enumerate(questions):
            for symbol in _SYMBOL.findall(text):
                if symbol in self.symbol_entity:
                    match[q, self.symbol_entity[symbol]] = 1.0
        return np.minimum(match, 1.0)

    def pair_features(
        self,
        questions: Sequence[str],
        match: np.ndarray | None = None,
        only: Sequence[str] = FEATURES,
        years: Sequence[frozenset[int]] | None = None,
    ) -> dict[str, np.ndarray]:
        """The features `only` (all of FEATURES by default), each a (questions x (company, year) pairs) float32
        matrix (`match`: the questions' `entity_match`, `years`: the years each names, when already made)."""
        n = len(questions)
        out = {}
        if "company" in only:
            match = self.entity_match(questions) if match is None else match
            out["company"] = np.zeros((n, len(self.pair_entity)), dtype=np.float32)
            linked = self.pair_entity >= 0
            if match.shape[1]:
                out["company"][:, linked] = match[:, self.pair_entity[linked]]
        if {"year", "year_before"} & set(only):
            mentioned = [years_named(text) for text in questions] if years is None else years
            out["year"] = self._year_match(mentioned, 0)
            out["year_before"] = self._year_match(mentioned, 1)
        if "report_named" in only:
            out["report_named"] = self._year_match([named_report_years(text) for text in questions], 0)
        return {name: out[name] for name in only if name in out}

    def company_words(self, questions: Sequence[str], match: np.ndarray | None = None) -> list[frozenset[str]]:
        """Per question, the lowercased words that name the company it matches best (at NAMED_MATCH or more): the
        name's words and their prefixes of MIN_PREFIX letters or more ("citi"), its ticker, and the legal forms
        ("plc", "inc"); none when it names no company. `match`: the questions' `entity_match`, when already made."""
        match = self.entity_match(questions) if match is None else match
        best = match.max(axis=1) if match.shape[1] else np.zeros(len(questions))
        out = [frozenset()] * len(questions)
        for q in np.flatnonzero(best >= NAMED_MATCH):
            matched = tuple(np.flatnonzero(match[q] >= best[q]).tolist())
            words = self._company_words.get(matched)
            if words is None:
                words = frozenset().union(LEGAL_FORMS, *(self.entity_words[e] for e in matched))
                self._company_words[matched] = words
            out[q] = words
        return out

    def features(
        self,
        questions: Sequence[str],
        match: np.ndarray | None = None,
        years: Sequence[frozenset[int]] | None = None,
    ) -> dict[str, np.ndarray]:
        """Each feature of FEATURES as a (questions x documents) float32 matrix."""
        features = self.pair_features(questions, match, years=years)
        return {name: values[:, self.doc_pair] for name, values in features.items()}

    def weighted(
        self,
        questions: Sequence[str],
        weights: dict[str, float],
        match: np.ndarray | None = None,
        years: Sequence[frozenset[int]] | None = None,
    ) -> np.ndarray:
        """(questions x documents) float64: the features' weighted sum, gathered over the documents once."""
        pairs = np.zeros((len(questions), len(self.pair_entity)))
        used = [name for name in FEATURES if weights.get(name)]
        for name, values in self.pair_features(questions, match, used, years).items():
            pairs += weights[name] * values
        return pairs[:, self.doc_pair]

    def _year_match(self, mentioned: Sequence[Iterable[int]], back: int) -> np.ndarray:
        """(questions x pairs): whether the question mentions the pair's year minus `back`."""
        out = np.zeros((len(mentioned), len(self.pair_year)), dtype=np.float32)
        dated = self.pair_year >= 0
        if not dated.any():
            return out
        low = int(self.pair_year[dated].min()) - back
        span = int(self.pair_year.max()) - low + 1
        grid = np.zeros((len(mentioned), span), dtype=np.float32)  # question x year mentioned
        for q, years in enumerate(mentioned):
            for y in years:
                if 0 <= y - low < span:
                    grid[q, y - low] = 1.0
        out[:, dated] = grid[:, self.pair_year[dated] - back - low]
        return out


def _first_present(corpus: Corpus, columns: Sequence[str]) -> list[str | None]:
    """Per document, the first non-empty value among the columns."""
    values: list[str | None] = [None] * len(corpus)
    for column in columns:
        for i, v in enumerate(corpus.metadata_column(column)):
            if values[i] is None and v not in (None, ""):
                values[i] = v
    return values


def _year(value: str | None) -> int:
    if value is None:
        return -1
    match = YEAR.search(str(value))
    return int(match.group()) if match else -1
