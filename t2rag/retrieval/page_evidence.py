"""Page-level evidence: which page of a report a question is about, from what the page's table and text name.

A metadata-aware BM25 finds the right report; what it then gets wrong is which of the report's pages (contexts) the
question is about (`bench/retrieval_misses.py`). The question names line items ("order intake", "accrued wages and
vacation"), periods and figures, and a page's table names its line items in its row labels and its periods in its
header cells (the question's words and years among those headers, tried as features too, added nothing over the
metadata prior's year match on dev and were left out). Features per (question, context), all in [0, 1]:

- `row_words`: the share of the question's words (idf-weighted over the corpus's row labels) found among the
  context's table row labels;
- `line_item`: a row label the question names whole, weighted by that label's idf mass and scaled by the question's
  best context (0 where no label is named whole);
- `phrases`: the share of the question's adjacent word pairs (stop words dropped) that the context also has;
- `numbers`: the share of the question's figures (years excepted) that the context states, matched by value.

The tables are the contexts' markdown tables as the corpus holds them: TAT-DQA's (a label column, header rows with
an empty label) and FinQA's (pandas markdown with an index column, glued to the line before it). Only the question's
text is read on the question side. Every feature is a sparse incidence product, so a question costs its terms plus
one gather over the contexts; terms are kept as numeric keys (word ids, word-id pairs, values), so the index is
arrays whose size grows with the corpus's postings (100,000 contexts: see `docs/methods.md`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

import numpy as np
from scipy import sparse

PAGE_FEATURES: tuple[str, ...] = ("row_words", "line_item", "phrases", "numbers")

_WORD = re.compile(r"[a-z][a-z]+")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
_SEPARATOR_CELL = re.compile(r"^:?-+:?$")
#: Words that name no line item: question words, and the measures every financial table has.
# fmt: off
STOP_WORDS = frozenset({
    "the", "a", "an", "of", "in", "on", "for", "to", "and", "or", "by", "with", "from", "at", "as", "is", "are", "was",
    "were", "what", "which", "how", "much", "many", "did", "does", "do", "be", "been", "this", "that", "these",
    "those", "its", "it", "their", "total", "change", "percentage", "percent", "year", "years", "ratio", "average",
    "value", "amount", "between", "during",
})
# fmt: on


def row_labels(text: str) -> list[str]:
    """The row labels (first cells of data rows, lowercased) of every markdown table in a context.

    A table is a run of lines holding at least two '|'; a first line glued to the sentence before it ("... 2006
    ._| | millions |") starts at its first '|'. Rows above the separator, and rows whose first cell is empty (a
    second header row of years), are header rows, not labels; a pandas index column (right-aligned, numbers only)
    is dropped.
    """
    labels: list[str] = []
    for rows in _tables(text):
        cells = [[c.strip().lower() for c in row.strip().strip("|").split("|")] for row in rows]
        sep = next((i for i, row in enumerate(cells) if _is_separator(row)), None)
        if sep is not None and _has_index_column(cells, sep):
            cells = [row[1:] for row in cells]
        header_rows = range(sep if sep is not None else 1)
        labels += [row[0] for i, row in enumerate(cells) if i != sep and i not in header_rows and row and row[0]]
    return labels


def _tables(text: str) -> Iterable[list[str]]:
    rows: list[str] = []
    for line in text.splitlines():
        if line.count("|") >= 2:
            rows.append(line[line.index("|") :])
        elif rows:
            yield rows
            rows = []
    if rows:
        yield rows


def _is_separator(row: list[str]) -> bool:
    return any(row) and all(not c or _SEPARATOR_CELL.match(c.replace(" ", "")) for c in row)


def _has_index_column(cells: list[list[str]], sep: int) -> bool:
    return cells[sep][0].replace(" ", "") in ("---:", "--:", "-:") and all(
        not row[0] or row[0].isdigit() for row in cells[sep + 1 :] if row
    )


def content_words(text: str) -> list[str]:
    """Lowercased words of two letters or more, stop words dropped, in order."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def figures(text: str) -> set[str]:
    """The numbers a text states (thousands separators dropped), years excepted."""
    return {n for n in _NUMBER.findall(text.replace(",", "")) if not _YEAR.fullmatch(n)}


def word_pairs(words: Sequence[str]) -> set[tuple[str, str]]:
    """A text's adjacent word pairs (of its content words, in order)."""
    return set(itertools.pairwise(words))


#: Pair keys: a pair of word ids (a, b) is the integer a * PAIR_SPAN + b.
PAIR_SPAN = 1 << 31


class _Vocabulary:
    """Word ids: each word of the corpus gets one as it is read; a question's words no context has get -1."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, words: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.ids.setdefault(w, len(self.ids)) for w in words), np.int64, len(words))

    def find(self, words: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.ids.get(w, -1) for w in words), np.int64, len(words))


def _pair_keys(ids: np.ndarray) -> np.ndarray:
    """The keys of adjacent word-id pairs, pairs with an unknown word (-1) left out."""
    first, second = ids[:-1], ids[1:]
    known = (first >= 0) & (second >= 0)
    return first[known] * PAIR_SPAN + second[known]


def _figure_keys(text: str) -> np.ndarray:
    return np.array([float(n) for n in figures(text)], np.float64)


class _TermSets:
    """Per context, a set of terms (numeric keys: word ids, pair keys, figures) as a sparse (contexts x terms)
    incidence, with the terms' idf over the contexts. Only arrays are kept, so memory grows with the corpus's
    distinct terms and postings, not with Python objects per term."""

    def __init__(self, held: list[np.ndarray]):
        self.keys, cells = _distinct_cells(held, None)
        rows, cols = np.divmod(cells, max(len(self.keys), 1))
        shape = (len(held), len(self.keys))
        self.docs = sparse.csr_matrix((np.ones(len(cells), np.float32), (rows, cols)), shape=shape)
        df = np.bincount(cols, minlength=len(self.keys))
        self.idf = np.log((len(held) + 1) / (df + 0.5)).astype(np.float32)

    def asked(self, questions: list[np.ndarray]) -> sparse.csr_matrix:
        """(questions x terms): 1 where the question has the term (terms no context holds are left out)."""
        _, cells = _distinct_cells(questions, self.keys)
        rows, cols = np.divmod(cells, max(len(self.keys), 1))
        shape = (len(questions), len(self.keys))
        return sparse.csr_matrix((np.ones(len(cells), np.float32), (rows, cols)), shape=shape)

    def share(self, asks: sparse.csr_matrix, sizes: np.ndarray | None = None) -> sparse.csr_matrix:
        """(questions x contexts), sparse: the share of each question's terms (`asks`, from `asked`) a context holds,
        idf-weighted over the terms some context holds, or, given each question's number of terms (`sizes`), a
        plain share of all of them."""
        if sizes is None:
            asks = asks.multiply(self.idf).tocsr()
            total = np.asarray(asks.sum(axis=1)).ravel()
        else:
            total = sizes.astype(np.float32)
        return sparse.diags(1.0 / np.where(total > 0, total, 1.0)) @ (asks @ self.docs.T).tocsr()


def _distinct_cells(held: list[np.ndarray], keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct keys (those given, or all of `held`'s) and each distinct (row, key) cell of `held` as
    row * len(keys) + key position, sorted; keys outside the given ones are dropped."""
    row = np.repeat(np.arange(len(held), dtype=np.int64), [len(h) for h in held])
    flat = np.concatenate(held) if held else np.zeros(0)
    if keys is None:
        keys, col = np.unique(flat, return_inverse=True)
    else:
        col = np.minimum(np.searchsorted(keys, flat), max(len(keys) - 1, 0))
        found = keys[col] == flat if len(keys) else np.zeros(len(flat), bool)
        row, col = row[found], col[found]
    return keys, np.unique(row * max(len(keys), 1) + col.ravel())


class PageEvidence:
    """Fitted once on a corpus's texts; `features(questions)` scores every context for every question."""

    def __init__(self, texts: Sequence[str]):
        self.n_docs = len(texts)
        self.vocabulary = _Vocabulary()
        labels = [[self.vocabulary.add(content_words(label)) for label in row_labels(t)] for t in texts]
        self.row_words = _TermSets([np.concatenate(ls) if ls else np.zeros(0, np.int64) for ls in labels])
        self.phrases = _TermSets([_pair_keys(self.vocabulary.add(content_words(t))) for t in texts])
        self.numbers = _TermSets([_figure_keys(t) for t in texts])
        # Every (context, label) with words, as a row: the label's idf mass (over the row-label vocabulary).
        named = [(d, ids) for d, ls in enumerate(labels) for ids in ls if len(ids)]
        self.label_doc = np.array([d for d, _ in named], np.int64)
        members = self.row_words.asked([ids for _, ids in named])
        self.label_terms = members.multiply(self.row_words.idf).tocsr()
        self.label_mass = np.asarray(self.label_terms.sum(axis=1)).ravel()

    def features(self, questions: Sequence[str]) -> dict[str, np.ndarray]:
        """Each feature of PAGE_FEATURES as a (questions x contexts) float32 matrix."""
        return {name: values.toarray().astype(np.float32) for name, values in self._sparse(questions).items()}

    def weighted(self, questions: Sequence[str], weights: dict[str, float]) -> np.ndarray:
        """(questions x contexts) float64: the features' weighted sum, added where each feature is nonzero."""
        total = np.zeros((len(questions), self.n_docs))
        for name, values in self._sparse(questions).items():
            if weights.get(name):
                cells = values.tocoo()
                total[cells.row, cells.col] += weights[name] * cells.data  # a COO from CSR holds each cell once
        return total

    def _sparse(self, questions: Sequence[str]) -> dict[str, sparse.csr_matrix]:
        words = [content_words(q) for q in questions]
        ids = [self.vocabulary.find(w) for w in words]
        in_labels = self.row_words.asked(ids)
        pair_counts = np.array([len(word_pairs(w)) for w in words])
        figure_keys = [_figure_keys(q) for q in questions]
        return {
            "row_words": self.row_words.share(in_labels),
            "line_item": self._line_item(in_labels),
            "phrases": self.phrases.share(self.phrases.asked([_pair_keys(i) for i in ids]), pair_counts),
            "numbers": self.numbers.share(self.numbers.asked(figure_keys), np.array([len(f) for f in figure_keys])),
        }

    def _line_item(self, in_labels: sparse.csr_matrix) -> sparse.csr_matrix:
        """(questions x contexts), sparse: the idf mass of the largest row label each context has that the question
        names whole (`in_labels`: the question's row-label words), over the question's best such mass."""
        n = in_labels.shape[0]
        if not len(self.label_doc):
            return sparse.csr_matrix((n, self.n_docs), dtype=np.float32)
        named = (in_labels @ self.label_terms.T).tocoo()  # matched mass per (question, label)
        whole = named.data >= self.label_mass[named.col] * (1 - 1e-5)  # float32 sums in another order
        q, label = named.row[whole].astype(np.int64), named.col[whole]
        cells, at = np.unique(q * self.n_docs + self.label_doc[label], return_inverse=True)
        mass = np.zeros(len(cells), np.float32)
        np.maximum.at(mass, at, self.label_mass[label])  # a context's largest label the question names whole
        rows, cols = np.divmod(cells, self.n_docs)
        best = np.zeros(n, np.float32)
        np.maximum.at(best, rows, mass)
        scaled = mass / np.where(best[rows] > 0, best[rows], 1.0)
        return sparse.csr_matrix((scaled, (rows, cols)), shape=(n, self.n_docs))
