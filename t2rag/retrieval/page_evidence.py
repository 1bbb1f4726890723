"""Page-level evidence: which page of a report a question is about, from what the page's table and text name.

A metadata-aware BM25 finds the right report; what it then gets wrong is which of the report's pages (contexts) the
question is about (`bench/retrieval_misses.py`). The question names line items ("order intake", "accrued wages and
vacation"), periods and figures, and a page's table names its line items in its row labels and its periods in its
header cells (the question's words and years anywhere among those headers, tried as features, added nothing over
the metadata prior's year match on dev; the years of the table holding the row the question names do: `row_years`).
Features per (question, context), all in [0, 1]:

- `row_words`: the share of the question's words (idf-weighted over the corpus's row labels) found among the
  context's table row labels;
- `line_item`: a row label the question names whole, weighted by that label's idf mass and scaled by the question's
  best context (0 where no label is named whole);
- `phrases`: the share of the question's adjacent word pairs (stop words dropped, plurals folded) that the context
  also has;
- `triples`: likewise for runs of three such words ("adjusted operating costs", "accrued wages vacation");
- `numbers`: the share of the question's figures (years excepted) that the context states, matched by value;
- `row_years`: the largest share of a row label's words (idf-weighted) that the question holds, over the labels
  whose table names every year the question names (in its header rows, or else its caption): the table a question
  was written from has its line item as a row and its years as columns, where another page of the report (the
  prior year's comparison) or the company's report of another year has the same row under other years. 0 for a
  question that names no year.

The tables are the contexts' markdown tables as the corpus holds them: TAT-DQA's (a label column, header rows with
an empty label) and FinQA's (pandas markdown with an index column, glued to the line before it). Only the question's
text is read on the question side. The row-label features are sparse incidence products over the labels (a few
dozen terms per context), so a question costs its terms plus one gather over the contexts. Word pairs and figures,
hundreds per context, are kept as each context's sorted 32-bit hashes (4 bytes per pair) and looked up only for the
contexts a first stage chose (`t2rag.retrieval.fused`): their cost per question is fixed whatever the corpus's
size, and no index over all pairs is built (it took 4.25 GB at 100,000 contexts; `docs/methods.md`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import sparse

from t2rag.retrieval.bm25_matrix import merge_doc_freqs
from t2rag.retrieval.years import YEAR, mask_of, year_mask, years_named

#: Features of the row labels, scored on every context.
CORPUS_FEATURES: tuple[str, ...] = ("row_words", "line_item")
#: Features of word pairs, figures and the years of the rows a question names, scored on the contexts a first stage
#: chose (`t2rag.retrieval.fused`).
CANDIDATE_FEATURES: tuple[str, ...] = ("phrases", "triples", "numbers", "row_years")
PAGE_FEATURES: tuple[str, ...] = (*CORPUS_FEATURES, *CANDIDATE_FEATURES)
#: bm25_page's page features (`triples` came with bm25_focus).
FIRST_PAGE_FEATURES: tuple[str, ...] = ("row_words", "line_item", "phrases", "numbers")

_WORD = re.compile(r"[a-z][a-z]+")
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
    ._| | millions |") starts at its first '|'. Rows above the separator, rows whose first cell is empty (a
    second header row of years) and rows of years alone are header rows, not labels; a pandas index column
    (right-aligned, numbers only) is dropped; a label wrapped onto the next printed row is joined (`_continues`).
    """
    return [label for label, _ in labelled_rows(text)]


def labelled_rows(text: str) -> list[tuple[str, int]]:
    """Each row label of a context's tables (as `row_labels` gives them) with the years its table's header rows
    name, as a `year_mask`; a table whose header names none has its caption's ("... for the years ended December
    31, 2019 and 2018:")."""
    labelled: list[tuple[str, int]] = []
    for caption, rows in _tables(text):
        raw = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
        sep = next((i for i, row in enumerate(raw) if _is_separator(row)), None)
        if sep is not None and _has_index_column(raw, sep):
            raw = [row[1:] for row in raw]
        header_rows = set(range(sep if sep is not None else 1))
        header_rows |= {i for i, row in enumerate(raw) if i != sep and _years_only(row)}
        header = [row for i, row in enumerate(raw) if i != sep and (i in header_rows or not row or not row[0])]
        years = year_mask(" ".join(cell for row in header for cell in row)) or year_mask(caption)
        data = [row for i, row in enumerate(raw) if i != sep and i not in header_rows and row and row[0]]
        joined: list[list[str]] = []
        for row in data:
            if joined and _continues(joined[-1], row):
                joined[-1] = [f"{joined[-1][0]} {row[0]}", *(joined[-1][1:] if any(joined[-1][1:]) else row[1:])]
            else:
                joined.append(row)
        labelled += [(row[0].lower(), years) for row in joined]
    return labelled


def _continues(previous: list[str], row: list[str]) -> bool:
    """Whether a row's label is the rest of the row above's, wrapped in the printed table: it starts in lower case
    ("Depreciation" / "and amortisation") and one of the two rows holds no values."""
    return row[0][0].islower() and (not any(row[1:]) or not any(previous[1:]))


def _years_only(row: list[str]) -> bool:
    """Whether a row's cells are years and blanks only: a header row printed below the separator."""
    cells = [c.strip("*") for c in row if c]
    return bool(cells) and all(YEAR.fullmatch(c) for c in cells)


def _tables(text: str) -> Iterable[tuple[str, list[str]]]:
    """Each table's rows with its caption: the last line of text before it (or the text its first row is glued to)."""
    rows: list[str] = []
    caption = last = ""
    for line in text.splitlines():
        if line.count("|") >= 2:
            if not rows:
                glued = line[: line.index("|")].strip()
                caption = glued or last
            rows.append(line[line.index("|") :])
        else:
            if rows:
                yield caption, rows
                rows = []
            if line.strip():
                last = line.strip()
    if rows:
        yield caption, rows


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
    return {n for n in _NUMBER.findall(text.replace(",", "")) if not YEAR.fullmatch(n)}


def word_pairs(words: Sequence[str]) -> set[tuple[str, str]]:
    """A text's adjacent word pairs (of its content words, in order)."""
    return set(itertools.pairwise(words))


def word_triples(words: Sequence[str]) -> set[tuple[str, str, str]]:
    """A text's runs of three adjacent content words."""
    return set(zip(words, words[1:], words[2:], strict=False))


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A plural folded to its singular ("fees" -> "fee", "liabilities" -> "liability"), other words as they are:
    a question asks about "the servicing fee" where its page prints "servicing fees"."""
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def phrase_words(text: str) -> list[str]:
    """The content words word pairs and triples are made of: stemmed, in order."""
    return [stem(w) for w in content_words(text)]


#: Pair keys: a pair of word ids (a, b) is the integer a * PAIR_SPAN + b.
PAIR_SPAN = 1 << 31
#: Documents read together while a key-set index is built (the per-document arrays die with their chunk).
BUILD_CHUNK = 1 << 14


class _Vocabulary:
    """Word ids: each word of the corpus gets one as it is read; a question's words no context has get -1."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, words: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.ids.setdefault(w, len(self.ids)) for w in words), np.int64, len(words))

    def find(self, words: Sequence[str]) -> np.ndarray:
        return np.fromiter(map(self.ids.get, words, itertools.repeat(-1)), np.int64, len(words))


def _pair_keys(ids: np.ndarray, row: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The keys of adjacent word-id pairs, pairs with an unknown word (-1) left out, and their row: the ids of
    several texts are given one after another with each id's `row` (text), and a pair never spans two texts."""
    row = np.zeros(len(ids), np.int64) if row is None else row
    known = (ids[:-1] >= 0) & (ids[1:] >= 0) & (row[:-1] == row[1:])
    return ids[:-1][known] * PAIR_SPAN + ids[1:][known], row[:-1][known]


def _triple_keys(ids: np.ndarray, row: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Keys of runs of three word ids (a pair's key mixed with the third id), as `_pair_keys` gives pairs."""
    row = np.zeros(len(ids), np.int64) if row is None else row
    first, second, third = ids[:-2], ids[1:-1], ids[2:]
    known = (first >= 0) & (second >= 0) & (third >= 0) & (row[:-2] == row[2:])
    pair = (first[known] * PAIR_SPAN + second[known]).view(np.uint64)
    return (pair * np.uint64(0xBF58476D1CE4E5B9)) ^ third[known].view(np.uint64), row[:-2][known]


def _figure_keys(text: str) -> np.ndarray:
    return np.array([float(n) for n in figures(text)], np.float64)


#: A salt per kind of key, so that a word pair, a run of three words and a figure never share a hash by design.
KIND_SALTS = (np.uint64(0), np.uint64(0xA0761D6478BD642F), np.uint64(0xE7037ED1A0B428DB))
PAIRS, TRIPLES, FIGURES = range(3)


def _mix(keys: np.ndarray, kind: int = PAIRS) -> np.ndarray:
    """32-bit hashes of 64-bit keys (int64, uint64 or float64 bit patterns) of one kind."""
    bits = np.ascontiguousarray(keys).view(np.uint64) ^ KIND_SALTS[kind]
    mixed = (bits ^ (bits >> np.uint64(31))) * np.uint64(0x9E3779B97F4A7C15)
    return (mixed >> np.uint64(32)).astype(np.uint32)


def hashed(keys: np.ndarray, kind: int = PAIRS) -> np.ndarray:
    """Distinct 32-bit hashes of 64-bit keys of one kind, sorted.

    A context's set is searched only for a question's few keys, so two keys share a hash inside one context's set
    with a probability near (set size) / 2^32 per lookup: about one wrong match in ten million."""
    return np.unique(_mix(keys, kind))


def hashed_each(keys: np.ndarray, row: np.ndarray, rows: int, kind: int = PAIRS) -> list[np.ndarray]:
    """`hashed` of each row's keys (`row`: each key's row, of `rows`), made in one pass over all of them."""
    both = np.unique((row.astype(np.uint64) << np.uint64(32)) | _mix(keys, kind).astype(np.uint64))
    bounds = np.searchsorted(both >> np.uint64(32), np.arange(rows + 1, dtype=np.uint64))
    hashes = (both & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return [hashes[a:b] for a, b in itertools.pairwise(bounds.tolist())]


#: Bloom filter bits per key of a context's set: a key the context lacks passes it about once in nine lookups.
FILTER_BITS = 8


class _KeySets:
    """Per context, a sorted set of 32-bit term hashes (word pairs, triples or figures), all in one array with each
    context's span, and a one-hash Bloom filter per context (FILTER_BITS bits per key): 5 bytes per (context, term),
    and no index over terms. Scored only for the (question, context) pairs a first stage chose: a question's key
    that passes the context's filter is looked up in the context's span by binary search (most keys are not in most
    candidates, and the filter turns nine in ten of those away with one memory read)."""

    def __init__(self, per_document: Iterable[np.ndarray]):
        lengths, chunks, pending = [0], [], []
        for keys in per_document:
            pending.append(keys)
            lengths.append(len(keys))
            if len(pending) == BUILD_CHUNK:
                chunks.append(np.concatenate(pending))
                pending = []
        chunks.append(np.concatenate(pending) if pending else np.zeros(0, np.uint32))
        self.keys = np.concatenate(chunks).astype(np.uint32, copy=False)
        del chunks, pending
        counts = np.array(lengths[1:], np.int64)
        self.starts = np.concatenate([[0], np.cumsum(counts)])  # context d holds keys[starts[d]:starts[d + 1]]
        self.longest = int(counts.max()) if len(counts) else 0
        words = (counts * FILTER_BITS + 63) // 64  # 64-bit words of each context's filter
        self.filter_starts = np.concatenate([[0], np.cumsum(words)])
        self.filter_bits = (words * 64).astype(np.uint64)
        self.filter = np.zeros(int(self.filter_starts[-1]), np.uint64)
        # And one filter over every context's keys: a question's key no context holds is looked up nowhere.
        self.anywhere = np.zeros(max((len(self.keys) * FILTER_BITS + 63) // 64, 1), np.uint64)
        for first in range(0, len(counts), BUILD_CHUNK):  # a chunk of contexts at a time: bounded temporaries
            docs = np.arange(first, min(first + BUILD_CHUNK, len(counts)))
            doc = np.repeat(docs, counts[docs])
            held = self.keys[self.starts[docs[0]] : self.starts[docs[-1] + 1]]
            word, bit = self._slot(doc, self._spread(held))
            np.bitwise_or.at(self.filter, word, np.left_shift(np.uint64(1), bit))
            word, bit = self._anywhere_slot(held)
            np.bitwise_or.at(self.anywhere, word, np.left_shift(np.uint64(1), bit))

    def _slot(self, doc: np.ndarray, spread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The filter word and bit of each (context, key), given the key's `_spread`."""
        bit = (spread * self.filter_bits[doc]) >> np.uint64(32)  # in [0, bits): no division
        return self.filter_starts[doc] + (bit >> np.uint64(6)).astype(np.int64), bit & np.uint64(63)

    def _anywhere_slot(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The word and bit of each key in the filter over every context's keys."""
        spread = (key.astype(np.uint64) * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
        bit = (spread * np.uint64(64 * len(self.anywhere))) >> np.uint64(32)
        return (bit >> np.uint64(6)).astype(np.int64), bit & np.uint64(63)

    @staticmethod
    def _spread(key: np.ndarray) -> np.ndarray:
        """A second 32-bit hash of each key (uint64), placing it in a filter."""
        return (key.astype(np.uint64) * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)

    @property
    def nbytes(self) -> int:
        filters = self.filter.nbytes + self.filter_starts.nbytes + self.anywhere.nbytes
        return self.keys.nbytes + self.starts.nbytes + filters

    def _may_be_held(self, keys: np.ndarray) -> np.ndarray:
        """Whether some context may hold each key (False: none does)."""
        word, bit = self._anywhere_slot(keys)
        return ((self.anywhere[word] >> bit) & np.uint64(1)).astype(bool)

    def found(self, docs: np.ndarray, asks: Sequence[list[np.ndarray]]) -> np.ndarray:
        """(kinds x questions x candidates): how many of each question's keys of each kind (`asks[kind]`, sorted
        distinct hashes per question) the candidate contexts `docs` (questions x candidates positions) hold."""
        q_count, width = docs.shape
        counts = np.zeros((len(asks), q_count, width), np.float32)
        rows = [a for kind in asks for a in kind]
        flat = np.concatenate(rows) if rows else np.zeros(0, np.uint32)
        asker = np.repeat(np.arange(len(asks) * q_count), [len(a) for a in rows])  # kind * questions + question
        kept = self._may_be_held(flat)  # a key no context holds is looked up nowhere
        flat, asker = flat[kept], asker[kept]
        if not len(flat) or not len(self.keys):
            return counts
        spread, last, longest = self._spread(flat), len(self.keys) - 1, 1 << self.longest.bit_length()
        question = asker % q_count
        for c in range(width):  # one candidate rank at a time: every question's keys, arrays that stay in cache
            doc = docs[question, c]
            word, bit = self._slot(doc, spread)
            passed = np.flatnonzero((self.filter[word] >> bit) & np.uint64(1))
            doc, key, who = doc[passed], flat[passed], asker[passed]
            # A branch-free binary search in each context's span (one step per power of two below the longest
            # span): after each step, every key before `position` in the span is below the looked-up one.
            position, end = self.starts[doc], self.starts[doc + 1]
            step = longest
            while step:
                ahead = position + step
                position += step * ((ahead <= end) & (self.keys[np.minimum(ahead - 1, last)] < key))
                step >>= 1
            hit = (position < end) & (self.keys[np.minimum(position, last)] == key)
            counts[:, :, c] = np.bincount(who[hit], minlength=len(asks) * q_count).reshape(len(asks), q_count)
        return counts


class _TermSets:
    """Per context, a set of terms (numeric keys: word ids) as a sparse (contexts x terms) incidence, with the
    terms' idf over the contexts. Only arrays are kept, so memory grows with the corpus's distinct terms and
    postings, not with Python objects per term."""

    def __init__(self, held: list[np.ndarray], counts: RowWordCounts | None = None):
        """`counts`: the whole corpus's, when `held` is a shard of it (its term ids are then the corpus's)."""
        keys = None if counts is None else np.arange(len(counts.words), dtype=np.int64)
        self.keys, cells = _distinct_cells(held, keys)
        rows, cols = np.divmod(cells, max(len(self.keys), 1))
        shape = (len(held), len(self.keys))
        self.docs = sparse.csr_matrix((np.ones(len(cells), np.float32), (rows, cols)), shape=shape)
        df = np.bincount(cols, minlength=len(self.keys)) if counts is None else counts.doc_freq
        n = len(held) if counts is None else counts.n_docs
        self.idf = np.log((n + 1) / (df + 0.5)).astype(np.float32)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.docs.data.nbytes + self.docs.indices.nbytes + self.docs.indptr.nbytes

    def asked(self, questions: list[np.ndarray]) -> sparse.csr_matrix:
        """(questions x terms): 1 where the question has the term (terms no context holds are left out)."""
        return self._incidence(_distinct_cells(questions, self.keys)[1], len(questions))

    def asked_flat(self, terms: np.ndarray, row: np.ndarray, n: int) -> sparse.csr_matrix:
        """`asked` of `n` questions given as one array of terms with each term's question (`row`)."""
        return self._incidence(_distinct_cells_flat(terms, row.astype(np.int64, copy=False), self.keys)[1], n)

    def _incidence(self, cells: np.ndarray, n: int) -> sparse.csr_matrix:
        rows, cols = np.divmod(cells, max(len(self.keys), 1))
        return sparse.csr_matrix((np.ones(len(cells), np.float32), (rows, cols)), shape=(n, len(self.keys)))

    def share(self, asks: sparse.csr_matrix) -> sparse.csr_matrix:
        """(questions x contexts), sparse: the share of each question's terms (`asks`, from `asked`) a context
        holds, idf-weighted over the terms some context holds."""
        asks = asks.multiply(self.idf).tocsr()
        total = np.asarray(asks.sum(axis=1)).ravel()
        return sparse.diags(1.0 / np.where(total > 0, total, 1.0)) @ (asks @ self.docs.T).tocsr()


def _distinct_cells(held: list[np.ndarray], keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct keys (those given, or all of `held`'s) and each distinct (row, key) cell of `held` as
    row * len(keys) + key position, sorted; keys outside the given ones are dropped."""
    row = np.repeat(np.arange(len(held), dtype=np.int64), [len(h) for h in held])
    return _distinct_cells_flat(np.concatenate(held) if held else np.zeros(0), row, keys)


def _distinct_cells_flat(flat: np.ndarray, row: np.ndarray, keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """`_distinct_cells` of rows given as one array of keys with each key's row."""
    if keys is None:
        keys, col = np.unique(flat, return_inverse=True)
    else:
        col = np.minimum(np.searchsorted(keys, flat), max(len(keys) - 1, 0))
        found = keys[col] == flat if len(keys) else np.zeros(len(flat), bool)
        row, col = row[found], col[found]
    return keys, np.unique(row * max(len(keys), 1) + col.ravel())


@dataclass(frozen=True)
class RowWordCounts:
    """The words of a corpus's row labels in first-seen order, the contexts holding each, and the contexts in all:
    what a shard's row-label features need of the whole corpus."""

    words: tuple[str, ...]
    doc_freq: np.ndarray
    n_docs: int

    @classmethod
    def of(cls, texts: Sequence[str]) -> RowWordCounts:
        vocabulary = _Vocabulary()
        held = [np.unique(vocabulary.add([w for label in row_labels(t) for w in content_words(label)])) for t in texts]
        flat = np.concatenate(held) if held else np.zeros(0, np.int64)
        return cls(tuple(vocabulary.ids), np.bincount(flat, minlength=len(vocabulary.ids)), len(texts))

    @classmethod
    def merge(cls, parts: Sequence[RowWordCounts]) -> RowWordCounts:
        """The counts of consecutive pieces of one corpus, in corpus order."""
        ids, doc_freq = merge_doc_freqs([(p.words, p.doc_freq) for p in parts])
        return cls(tuple(ids), doc_freq, sum(p.n_docs for p in parts))


@dataclass(frozen=True)
class Asked:
    """What page evidence reads of a block of questions: their words (for the row labels), word pairs, runs of
    three words and figures."""

    words: list[list[str]]  # content words, in order
    in_labels: sparse.csr_matrix  # (questions x row-label terms): the words some context's row labels hold
    named: sparse.csr_matrix  # (questions x row labels): the idf mass of each label's words the question names
    pairs: list[np.ndarray]  # sorted distinct hashes of the known word pairs
    pair_counts: np.ndarray  # distinct word pairs of each question, known or not
    triples: list[np.ndarray]  # likewise for runs of three words
    triple_counts: np.ndarray
    figures: list[np.ndarray]  # sorted distinct hashes of the figures
    figure_counts: np.ndarray
    years: np.ndarray  # the years each question names (`year_mask`, uint64)


class PageEvidence:
    """Fitted once on a corpus's texts. The row-label features (`CORPUS_FEATURES`) score every context through small
    label indexes; the word-pair and figure features (`CANDIDATE_FEATURES`) score the contexts a first stage chose,
    from per-context key sets, so neither the memory nor the cost of those grows with the pairs of every context a
    question's terms reach."""

    def __init__(self, texts: Sequence[str], counts: RowWordCounts | None = None):
        """`counts`: the row-label words of the whole corpus when `texts` are a shard of it, so that the shard
        scores its contexts exactly as the whole corpus's index would."""
        self.n_docs = len(texts)
        self.vocabulary = _Vocabulary()  # the row labels' words
        if counts is not None:
            self.vocabulary.add(counts.words)  # the corpus's ids, in its first-seen order
        self.stems = _Vocabulary()  # the stemmed words of pairs and triples
        labels: list[list[np.ndarray]] = []
        years: list[list[int]] = []  # each label's table's header years (`year_mask`)
        key_sets = []
        for text in texts:
            rows = labelled_rows(text)
            labels.append([self.vocabulary.add(content_words(label)) for label, _ in rows])
            years.append([mask for _, mask in rows])
            ids = self.stems.add(phrase_words(text))
            kinds = (_mix(_pair_keys(ids)[0]), _mix(_triple_keys(ids)[0], TRIPLES), _mix(_figure_keys(text), FIGURES))
            key_sets.append(np.unique(np.concatenate(kinds)))
        self.sets = _KeySets(key_sets)  # each context's word pairs, triples and figures, hashed by kind
        del key_sets
        self.row_words = _TermSets([np.concatenate(ls) if ls else np.zeros(0, np.int64) for ls in labels], counts)
        # Every (context, label) with words, as a row: the label's idf mass (over the row-label vocabulary).
        named = [(d, ids, mask) for d, ls in enumerate(labels) for ids, mask in zip(ls, years[d], strict=True)]
        named = [(d, ids, mask) for d, ids, mask in named if len(ids)]
        self.label_doc = np.array([d for d, _, _ in named], np.int64)
        self.label_years = np.array([mask for _, _, mask in named], np.uint64)
        members = self.row_words.asked([ids for _, ids, _ in named])
        self.label_terms = members.multiply(self.row_words.idf).tocsr()
        self.label_mass = np.asarray(self.label_terms.sum(axis=1)).ravel()

    @property
    def nbytes(self) -> int:
        """Memory held by the index's arrays (the vocabulary's dictionary aside)."""
        labels = self.label_terms.data.nbytes + self.label_terms.indices.nbytes + self.label_terms.indptr.nbytes
        located = self.label_doc.nbytes + self.label_years.nbytes
        return self.sets.nbytes + self.row_words.nbytes + labels + located

    def asked(self, questions: Sequence[str], years: Sequence[frozenset[int]] | None = None) -> Asked:
        """What the features read of the questions (`years`: the years each names, when already read)."""
        years = [years_named(q) for q in questions] if years is None else years
        said = [content_words(q) for q in questions]
        words = [[stem(w) for w in ws] for ws in said]
        lengths = [len(w) for w in words]
        ids = self.stems.find([w for ws in words for w in ws])
        row = np.repeat(np.arange(len(questions)), lengths)
        stated = [figures(q) for q in questions]
        values = np.array([float(n) for f in stated for n in f], np.float64)
        value_row = np.repeat(np.arange(len(questions)), [len(f) for f in stated])
        n = len(questions)
        in_labels = self._row_label_words(said)
        return Asked(
            words=said,
            in_labels=in_labels,
            named=(in_labels @ self.label_terms.T).tocsr(),
            pairs=hashed_each(*_pair_keys(ids, row), n),
            pair_counts=np.array([len(word_pairs(w)) for w in words], np.float32),
            triples=hashed_each(*_triple_keys(ids, row), n, TRIPLES),
            triple_counts=np.array([len(word_triples(w)) for w in words], np.float32),
            figures=hashed_each(values, value_row, n, FIGURES),
            figure_counts=np.array([len(f) for f in stated], np.float32),
            years=np.array([mask_of(y) for y in years], np.uint64),
        )

    def features(self, questions: Sequence[str] | Asked) -> dict[str, np.ndarray]:
        """Each feature of PAGE_FEATURES as a (questions x contexts) float32 matrix, every context scored (the
        questions, or what `asked` read of them)."""
        asked = questions if isinstance(questions, Asked) else self.asked(questions)
        out = {name: values.toarray().astype(np.float32) for name, values in self.corpus_features(asked).items()}
        every = np.broadcast_to(np.arange(self.n_docs), (len(asked.words), self.n_docs))
        out.update(self.candidate_features(asked, every))
        return out

    def corpus_features(self, asked: Asked) -> dict[str, sparse.csr_matrix]:
        """The CORPUS_FEATURES, (questions x contexts) sparse."""
        return {"row_words": self.row_words.share(asked.in_labels), "line_item": self._line_item(asked.named)}

    def candidate_features(
        self, asked: Asked, docs: np.ndarray, names: Sequence[str] = CANDIDATE_FEATURES
    ) -> dict[str, np.ndarray]:
        """The CANDIDATE_FEATURES named (all by default) of the contexts `docs` ((questions x candidates)
        positions), same shape."""
        keyed = {
            "phrases": (asked.pairs, asked.pair_counts),
            "triples": (asked.triples, asked.triple_counts),
            "numbers": (asked.figures, asked.figure_counts),
        }
        looked_up = [name for name in names if name in keyed]
        found = self.sets.found(docs, [keyed[name][0] for name in looked_up]) if looked_up else []
        out = {name: held / np.maximum(keyed[name][1], 1)[:, None] for name, held in zip(looked_up, found, strict=True)}
        if "row_years" in names:
            out["row_years"] = self.row_years(asked, docs)
        return out

    def row_years(self, asked: Asked, docs: np.ndarray) -> np.ndarray:
        """The `row_years` feature of the contexts `docs` ((questions x candidates) positions; -1: none), float32.
        It reads the (question, label) matches the line items made (`Asked.named`), keeps those whose table names
        every year asked (a question that names no year keeps none), and places the kept ones of each question's
        candidates through a slot per chosen context: no array spans the questions times the corpus."""
        out = np.zeros(docs.shape, np.float32)
        if not len(self.label_doc) or not asked.years.any():
            return out
        named = asked.named.tocoo()
        years = asked.years[named.row]
        held = (years != 0) & ((years & ~self.label_years[named.col]) == 0)
        row, label, mass = named.row[held], named.col[held], named.data[held]
        # Each chosen context's slot, and each question's candidate rank per slot (-1: not its candidate). Slot
        # len(chosen) stands for every context no question chose; the one after it takes the -1 positions.
        is_chosen = np.zeros(self.n_docs + 1, bool)
        is_chosen[docs] = True
        is_chosen[-1] = False
        chosen = np.flatnonzero(is_chosen)
        slot = np.full(self.n_docs + 1, len(chosen), np.int32)
        slot[chosen] = np.arange(len(chosen), dtype=np.int32)
        slot[-1] = len(chosen) + 1
        column = np.full((len(docs), len(chosen) + 2), -1, np.int32)
        column[np.arange(len(docs))[:, None], slot[docs]] = np.arange(docs.shape[1], dtype=np.int32)
        at = column[row, slot[self.label_doc[label]]]
        kept = at >= 0
        value = (mass[kept] / self.label_mass[label[kept]]).astype(np.float32)
        np.maximum.at(out, (row[kept], at[kept]), value)
        return out

    def _line_item(self, named: sparse.csr_matrix) -> sparse.csr_matrix:
        """(questions x contexts), sparse: the idf mass of the largest row label each context has that the question
        names whole (`named`: `Asked.named`), over the question's best such mass."""
        mass = self.line_item_mass(named).tocoo()
        best = line_item_best(mass)
        scaled = scale_line_item(mass.data, best[mass.row])
        return sparse.csr_matrix((scaled, (mass.row, mass.col)), shape=mass.shape)

    def _row_label_words(self, said: list[list[str]]) -> sparse.csr_matrix:
        """(questions x row-label terms): the questions' words (`said`) that some context's row labels hold."""
        ids = self.vocabulary.find([w for words in said for w in words])
        return self.row_words.asked_flat(ids, np.repeat(np.arange(len(said)), [len(w) for w in said]), len(said))

    def line_item_mass(self, named: sparse.csr_matrix) -> sparse.csr_matrix:
        """(questions x contexts), sparse float32: the idf mass of the largest row label each context has that the
        question names whole, before its scaling by the question's best (`scale_line_item`); `named`: `Asked.named`."""
        n = named.shape[0]
        if not len(self.label_doc):
            return sparse.csr_matrix((n, self.n_docs), dtype=np.float32)
        named = named.tocoo()
        whole = named.data >= self.label_mass[named.col] * (1 - 1e-5)  # float32 sums in another order
        q, label = named.row[whole].astype(np.int64), named.col[whole]
        cells, at = np.unique(q * self.n_docs + self.label_doc[label], return_inverse=True)
        mass = np.zeros(len(cells), np.float32)
        np.maximum.at(mass, at, self.label_mass[label])  # a context's largest label the question names whole
        rows, cols = np.divmod(cells, self.n_docs)
        return sparse.csr_matrix((mass, (rows, cols)), shape=(n, self.n_docs))


def line_item_best(mass: sparse.spmatrix) -> np.ndarray:
    """Per question, its best line-item mass over the contexts (float32; 0 where none is named)."""
    cells = mass.tocoo()
    best = np.zeros(mass.shape[0], np.float32)
    np.maximum.at(best, cells.row, cells.data.astype(np.float32))
    return best


def scale_line_item(mass: np.ndarray, best: np.ndarray) -> np.ndarray:
    """The `line_item` feature: a context's mass over its question's best (float32, as every index computes it)."""
    return (mass / np.where(best > 0, best, 1.0).astype(np.float32)).astype(np.float32)
