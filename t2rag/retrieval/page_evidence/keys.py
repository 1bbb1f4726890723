"""The compact sets page evidence looks terms up in: word ids, 64-bit keys of word pairs, runs of three words and
figures hashed to 32 bits, per-context key sets with Bloom filters (`KeySets`), sparse term incidences with idf
(`TermSets`) over the row labels' words, and where each context's words stand (`WordBlocks`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from t2rag.retrieval.lexical.bm25_matrix import merge_doc_freqs
from t2rag.retrieval.page_evidence.tables import row_labels
from t2rag.retrieval.page_evidence.words import (
    content_words,
    figures,
)

#: Pair keys: a pair of word ids (a, b) is the integer a * PAIR_SPAN + b.
PAIR_SPAN = 1 << 31


#: Documents read together while a key-set index is built (the per-document arrays die with their chunk).
BUILD_CHUNK = 1 << 14


class Vocabulary:
    """Word ids: each word of the corpus gets one as it is read; a question's words no context has get -1."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def add(self, words: Sequence[str]) -> np.ndarray:
        return np.fromiter((self.ids.setdefault(w, len(self.ids)) for w in words), np.int64, len(words))

    def find(self, words: Sequence[str]) -> np.ndarray:
        return np.fromiter(map(self.ids.get, words, itertools.repeat(-1)), np.int64, len(words))


def pair_keys(ids: np.ndarray, row: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The keys of adjacent word-id pairs, pairs with an unknown word (-1) left out, and their row: the ids of
    several texts are given one after another with each id's `row` (text), and a pair never spans two texts."""
    row = np.zeros(len(ids), np.int64) if row is None else row
    known = (ids[:-1] >= 0) & (ids[1:] >= 0) & (row[:-1] == row[1:])
    return ids[:-1][known] * PAIR_SPAN + ids[1:][known], row[:-1][known]


def triple_keys(ids: np.ndarray, row: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Keys of runs of three word ids (a pair's key mixed with the third id), as `pair_keys` gives pairs."""
    row = np.zeros(len(ids), np.int64) if row is None else row
    first, second, third = ids[:-2], ids[1:-1], ids[2:]
    known = (first >= 0) & (second >= 0) & (third >= 0) & (row[:-2] == row[2:])
    pair = (first[known] * PAIR_SPAN + second[known]).view(np.uint64)
    return (pair * np.uint64(0xBF58476D1CE4E5B9)) ^ third[known].view(np.uint64), row[:-2][known]


def figure_keys(text: str) -> np.ndarray:
    return np.array([float(n) for n in figures(text)], np.float64)


#: A salt per kind of key, so that a word pair, a run of three words and a figure never share a hash by design.
KIND_SALTS = (np.uint64(0), np.uint64(0xA0761D6478BD642F), np.uint64(0xE7037ED1A0B428DB))


PAIRS, TRIPLES, FIGURES = range(3)


def mix(keys: np.ndarray, kind: int = PAIRS) -> np.ndarray:
    """32-bit hashes of 64-bit keys (int64, uint64 or float64 bit patterns) of one kind."""
    bits = np.ascontiguousarray(keys).view(np.uint64) ^ KIND_SALTS[kind]
    mixed = (bits ^ (bits >> np.uint64(31))) * np.uint64(0x9E3779B97F4A7C15)
    return (mixed >> np.uint64(32)).astype(np.uint32)


def hashed(keys: np.ndarray, kind: int = PAIRS) -> np.ndarray:
    """Distinct 32-bit hashes of 64-bit keys of one kind, sorted.

    A context's set is searched only for a question's few keys, so two keys share a hash inside one context's set
    with a probability near (set size) / 2^32 per lookup: about one wrong match in ten million."""
    return np.unique(mix(keys, kind))


def hashed_each(keys: np.ndarray, row: np.ndarray, rows: int, kind: int = PAIRS) -> list[np.ndarray]:
    """`hashed` of each row's keys (`row`: each key's row, of `rows`), made in one pass over all of them."""
    both = np.unique((row.astype(np.uint64) << np.uint64(32)) | mix(keys, kind).astype(np.uint64))
    bounds = np.searchsorted(both >> np.uint64(32), np.arange(rows + 1, dtype=np.uint64))
    hashes = (both & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return [hashes[a:b] for a, b in itertools.pairwise(bounds.tolist())]


#: Bloom filter bits per key of a context's set: a key the context lacks passes it about once in nine lookups.
FILTER_BITS = 8


def first_not_below(
    values: np.ndarray, start: np.ndarray, end: np.ndarray, sought: np.ndarray, longest: int
) -> np.ndarray:
    """For each sought value, the first position in its span values[start:end] (sorted within the span) whose value
    is not below it: a branch-free binary search of every span at once, one step per power of two below `longest`
    (the longest span); after each step, every value before the position in the span is below the sought one."""
    position, last, step = start.copy(), max(len(values) - 1, 0), 1 << max(longest, 1).bit_length()
    while step:
        ahead = position + step
        position += step * ((ahead <= end) & (values[np.minimum(ahead - 1, last)] < sought))
        step >>= 1
    return position


class KeySets:
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
        spread = self._spread(flat)
        question = asker % q_count
        for c in range(width):  # one candidate rank at a time: every question's keys, arrays that stay in cache
            doc = docs[question, c]
            word, bit = self._slot(doc, spread)
            passed = np.flatnonzero((self.filter[word] >> bit) & np.uint64(1))
            doc, key, who = doc[passed], flat[passed], asker[passed]
            position, end = self.starts[doc], self.starts[doc + 1]
            position = first_not_below(self.keys, position, end, key, self.longest)
            hit = (position < end) & (self.keys[np.minimum(position, len(self.keys) - 1)] == key)
            counts[:, :, c] = np.bincount(who[hit], minlength=len(asks) * q_count).reshape(len(asks), q_count)
        return counts


class TermSets:
    """Per context, a set of terms (numeric keys: word ids) as a sparse (contexts x terms) incidence, with the
    terms' idf over the contexts. Only arrays are kept, so memory grows with the corpus's distinct terms and
    postings, not with Python objects per term."""

    def __init__(self, held: list[np.ndarray], counts: RowWordCounts | None = None):
        """`counts`: the whole corpus's, when `held` is a shard of it (its term ids are then the corpus's)."""
        keys = None if counts is None else np.arange(len(counts.words), dtype=np.int64)
        self.keys, cells = distinct_cells(held, keys)
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
        return self._incidence(distinct_cells(questions, self.keys)[1], len(questions))

    def asked_flat(self, terms: np.ndarray, row: np.ndarray, n: int) -> sparse.csr_matrix:
        """`asked` of `n` questions given as one array of terms with each term's question (`row`)."""
        return self._incidence(distinct_cells_flat(terms, row.astype(np.int64, copy=False), self.keys)[1], n)

    def _incidence(self, cells: np.ndarray, n: int) -> sparse.csr_matrix:
        rows, cols = np.divmod(cells, max(len(self.keys), 1))
        return sparse.csr_matrix((np.ones(len(cells), np.float32), (rows, cols)), shape=(n, len(self.keys)))

    def share(self, asks: sparse.csr_matrix) -> sparse.csr_matrix:
        """(questions x contexts), sparse: the share of each question's terms (`asks`, from `asked`) a context
        holds, idf-weighted over the terms some context holds."""
        asks = asks.multiply(self.idf).tocsr()
        total = np.asarray(asks.sum(axis=1)).ravel()
        return sparse.diags(1.0 / np.where(total > 0, total, 1.0)) @ (asks @ self.docs.T).tocsr()


def distinct_cells(held: list[np.ndarray], keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct keys (those given, or all of `held`'s) and each distinct (row, key) cell of `held` as
    row * len(keys) + key position, sorted; keys outside the given ones are dropped."""
    row = np.repeat(np.arange(len(held), dtype=np.int64), [len(h) for h in held])
    return distinct_cells_flat(np.concatenate(held) if held else np.zeros(0), row, keys)


def distinct_cells_flat(flat: np.ndarray, row: np.ndarray, keys: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """`distinct_cells` of rows given as one array of keys with each key's row."""
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
        vocabulary = Vocabulary()
        held = [np.unique(vocabulary.add([w for label in row_labels(t) for w in content_words(label)])) for t in texts]
        flat = np.concatenate(held) if held else np.zeros(0, np.int64)
        return cls(tuple(vocabulary.ids), np.bincount(flat, minlength=len(vocabulary.ids)), len(texts))

    @classmethod
    def merge(cls, parts: Sequence[RowWordCounts]) -> RowWordCounts:
        """The counts of consecutive pieces of one corpus, in corpus order."""
        ids, doc_freq = merge_doc_freqs([(p.words, p.doc_freq) for p in parts])
        return cls(tuple(ids), doc_freq, sum(p.n_docs for p in parts))


#: Content words per block of a context's text: a passage is two adjacent blocks (`WordBlocks`).
BLOCK_WORDS = 12
#: Blocks a context's words are placed in (later words fall in the last).
MAX_BLOCKS = 1 << 16


def word_blocks(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A context's distinct word ids (sorted) and the sorted blocks each is in, as one array of every word's blocks
    in turn (`ids`: its word ids in reading order, -1 for none): (words, blocks, each word's end in blocks)."""
    block = np.minimum(np.arange(len(ids)) // BLOCK_WORDS, MAX_BLOCKS - 1)
    known = ids >= 0
    cells = np.unique((ids[known] << 16) | block[known])
    words, ends = np.unique(cells >> 16, return_counts=True)
    return words, (cells & 0xFFFF).astype(np.uint16), np.cumsum(ends)


class WordBlocks:
    """Per context, where its words are: its distinct word ids (int32, sorted) with the end of each one's blocks
    (int32, within the context's), and the blocks (uint16, BLOCK_WORDS consecutive content words each) each word is
    in: about 10 bytes per distinct word, all in flat arrays with each context's spans. Scored only for a few
    candidates of a search's last stage: a question's word is found in a candidate by one binary search."""

    def __init__(self, per_document: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]):
        """`per_document`: each context's `word_blocks`."""
        n_words = np.array([len(w) for w, _, _ in per_document], np.int64)
        n_blocks = np.array([len(b) for _, b, _ in per_document], np.int64)
        self.words = np.concatenate([w for w, _, _ in per_document] or [np.zeros(0)]).astype(np.int32)
        self.word_ends = np.concatenate([e for _, _, e in per_document] or [np.zeros(0)]).astype(np.int32)
        self.blocks = np.concatenate([b for _, b, _ in per_document] or [np.zeros(0)]).astype(np.uint16)
        self.word_starts = np.concatenate([[0], np.cumsum(n_words)])  # context d's words: [word_starts[d], [d + 1])
        self.block_starts = np.concatenate([[0], np.cumsum(n_blocks)])
        self.longest = int(n_words.max()) if len(n_words) else 0

    @property
    def nbytes(self) -> int:
        arrays = (self.words, self.word_ends, self.blocks, self.word_starts, self.block_starts)
        return sum(a.nbytes for a in arrays)

    def best_passage(self, docs: np.ndarray, words: Sequence[np.ndarray]) -> np.ndarray:
        """(questions x candidates) float32: for each candidate context (`docs`, positions), the largest number of
        a question's distinct words (`words`: each question's distinct word ids) that one passage (two adjacent
        blocks) holds."""
        q_count, width = docs.shape
        out = np.zeros(docs.shape, np.float32)
        counts = np.array([len(w) for w in words], np.int64)
        if not counts.sum() or not len(self.words):
            return out
        question = np.repeat(np.arange(q_count), counts)
        # Each word's place in its question.
        slot = np.arange(len(question)) - np.repeat(np.cumsum(counts) - counts, counts)
        # Every (question, candidate, word) probe: where the candidate's blocks of that word are.
        pair = (question[:, None] * width + np.arange(width)[None, :]).ravel()
        doc = docs[question].ravel()
        word = np.repeat(np.concatenate(words), width)
        start, end = self.word_starts[doc], self.word_starts[doc + 1]
        at = first_not_below(self.words, start, end, word, self.longest)
        hit = (at < end) & (self.words[np.minimum(at, len(self.words) - 1)] == word)
        at, doc, pair, slot = at[hit], doc[hit], pair[hit], np.repeat(slot, width)[hit]
        local = at - self.word_starts[doc]
        first = self.block_starts[doc] + np.where(local > 0, self.word_ends[np.maximum(at - 1, 0)], 0)
        found = self.block_starts[doc] + self.word_ends[at] - first
        # Each occurrence (probe, block) counts for the passages starting at its block and at the one before.
        offsets = np.arange(found.sum()) - np.repeat(np.cumsum(found) - found, found)
        block = self.blocks[np.repeat(first, found) + offsets].astype(np.int64)
        pair, slot = np.repeat(pair, found), np.repeat(slot, found)
        bits = int(counts.max()).bit_length()  # of a word's place in its question
        cells = np.concatenate([(pair << (16 + bits)) | (block << bits) | slot,
                                (pair << (16 + bits)) | (np.maximum(block - 1, 0) << bits) | slot])  # fmt: skip
        cells.sort()
        cells = cells[np.concatenate([[True], cells[1:] != cells[:-1]])]  # each word once per (pair, passage)
        passage = cells >> bits
        first_word = np.flatnonzero(np.concatenate([[True], passage[1:] != passage[:-1]]))
        held = np.diff(np.append(first_word, len(cells)))  # distinct words per (pair, passage)
        np.maximum.at(out.reshape(-1), passage[first_word] >> 16, held.astype(np.float32))
        return out
