"""BM25 that returns exactly what `rank_bm25.BM25Okapi` returns, for blocks of queries at once, at any corpus size.

rank_bm25 scores one query at a time with a Python loop over documents per query term (about 0.1 s per query
on a few thousand documents). Here the corpus becomes BM25 weights per term: a posting list (sparse) for most terms,
and a dense row over all documents for terms in at least `DENSE_SHARE` of them (stopwords, years, units), where a
row takes less memory than its postings would or little more, and adding it is a contiguous vector add instead of a
scatter (most of a question's postings are such terms: 93% on resampled real contexts, a 5x faster block). A block
of queries against a block of documents is a (queries x block documents) array; the top k is kept as a running
selection across document blocks, so no queries x corpus matrix is ever made and memory per block is fixed
(`BLOCK_VALUES`).

Parity with rank_bm25 is bitwise: idf = ln(N - n + 0.5) - ln(n + 0.5) computed as that difference of logs; the mean
idf is a plain sum over the vocabulary in first-seen order divided by its size; idf below zero becomes epsilon x
mean idf; each per-term weight takes the same float operations; and a document's score adds the weights of the
query's terms one occurrence at a time in query order, from 0.0, as rank_bm25's loop does (a term that repeats
counts every time; terms unknown to the corpus add nothing). Scores stay float64: float32 sums reorder documents
whose scores differ by less than about 1e-7, which rank_bm25 does not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from t2rag.tokenize import Tokenizer, whitespace_tokenize

#: float64 scores held per (query block x document block): 32 MiB.
BLOCK_VALUES = 1 << 22
#: Documents per document block.
DOC_BLOCK = 1 << 18
#: Documents tokenized and weighted together while an index is built.
BUILD_CHUNK = 1 << 16
#: A term found in at least this share of the documents is held as a dense row (8 bytes per document) instead of
#: postings (12 bytes per document that has it): at most 2.7x its postings' memory, less above a share of 2/3.
DENSE_SHARE = 0.25


@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25


@dataclass(frozen=True)
class DocBlock:
    """The weights of documents first .. first + width - 1: postings (terms x width CSR) and dense rows."""

    first: int
    sparse: sp.csr_matrix
    dense: np.ndarray

    @property
    def width(self) -> int:
        return self.sparse.shape[1]


@dataclass(frozen=True)
class BM25Statistics:
    """What BM25 needs from the whole corpus: the vocabulary in first-seen order (its mean idf is summed in that
    order), document frequencies, the number of documents and their total length. Shards of one corpus built with
    the corpus's statistics score every document exactly as the unsharded matrix does."""

    vocab: dict[str, int]
    doc_freq: np.ndarray
    n_docs: int
    total_length: int

    @classmethod
    def of(cls, texts: Sequence[str], tokenizer: Tokenizer = whitespace_tokenize) -> BM25Statistics:
        vocab: dict[str, int] = {}
        doc_freq = np.zeros(0, dtype=np.int64)
        total = 0
        documents = _documents(texts, tokenizer, vocab, grow=True)
        for first in range(0, len(texts), BUILD_CHUNK):
            rows = [next(documents) for _ in range(min(BUILD_CHUNK, len(texts) - first))]
            total += sum(r[0] for r in rows)
            seen = np.bincount(np.concatenate([r[1] for r in rows]), minlength=len(vocab))
            doc_freq = np.concatenate([doc_freq, np.zeros(len(vocab) - len(doc_freq), np.int64)]) + seen
        return cls(vocab, doc_freq, len(texts), total)

    @classmethod
    def merge(cls, parts: Sequence[BM25Statistics]) -> BM25Statistics:
        """The statistics of consecutive pieces of one corpus, in corpus order."""
        vocab, doc_freq = merge_doc_freqs([(p.vocab, p.doc_freq) for p in parts])
        return cls(vocab, doc_freq, sum(p.n_docs for p in parts), sum(p.total_length for p in parts))


def merge_doc_freqs(parts: Sequence[tuple[Iterable[str], np.ndarray]]) -> tuple[dict[str, int], np.ndarray]:
    """The vocabulary of consecutive pieces of one corpus in first-seen order (term -> id) and each term's document
    frequency, from each piece's terms in its own first-seen order and their document frequencies."""
    vocab: dict[str, int] = {}
    for terms, _ in parts:
        for term in terms:
            vocab.setdefault(term, len(vocab))
    doc_freq = np.zeros(len(vocab), dtype=np.int64)
    for terms, counts in parts:
        doc_freq[[vocab[t] for t in terms]] += counts
    return vocab, doc_freq


def _term_major(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n_terms: int, n_docs: int) -> sp.csr_matrix:
    """A (terms x documents) CSR from postings given document-major (a counting sort by term: linear time, and
    each part freed as it is placed)."""
    counts = np.zeros(n_terms, dtype=np.int64)
    for term, _, _ in parts:
        counts += np.bincount(term, minlength=n_terms)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    data = np.empty(int(indptr[-1]))
    cursor = indptr[:-1].copy()
    while parts:
        term, doc, weight = parts.pop(0)
        order = np.argsort(term, kind="stable")  # within a part: by term, documents kept ascending
        term, doc, weight = term[order], doc[order], weight[order]
        starts = np.searchsorted(term, np.arange(n_terms))
        ends = np.searchsorted(term, np.arange(n_terms), side="right")
        lengths = ends - starts
        target = np.repeat(cursor - starts, lengths) + np.arange(len(term))
        indices[target], data[target] = doc, weight
        cursor += lengths
    return sp.csr_matrix((data, indices, indptr), shape=(n_terms, n_docs))


def _documents(texts: Sequence[str], tokenizer: Tokenizer, vocab: dict[str, int], grow: bool):
    """(length, sorted distinct term ids, their counts) per document; `grow` adds unseen terms to vocab in
    first-seen order, else every term must be in it."""
    for text in texts:
        tokens = tokenizer(text)
        if not tokens:
            yield 0, np.zeros(0, np.int64), np.zeros(0, np.int64)
            continue
        ids = (vocab.setdefault(t, len(vocab)) for t in tokens) if grow else (vocab[t] for t in tokens)
        uniq, cnt = np.unique(np.fromiter(ids, dtype=np.int64, count=len(tokens)), return_counts=True)
        yield len(tokens), uniq, cnt


class BM25Matrix:
    """BM25 term weights of a corpus (or of a shard, given the whole corpus's statistics): a (terms x documents)
    CSR of postings for most terms, and dense rows (`dense`, row `dense_row[term]`) for the terms in at least
    DENSE_SHARE of the documents."""

    def __init__(
        self,
        texts: Sequence[str],
        tokenizer: Tokenizer = whitespace_tokenize,
        params: BM25Params | None = None,
        statistics: BM25Statistics | None = None,
    ):
        self.params = params or BM25Params()
        self.tokenizer = tokenizer
        self.n_docs = len(texts)
        vocab = {} if statistics is None else statistics.vocab
        documents = _documents(texts, tokenizer, vocab, grow=statistics is None)
        self.doc_len = np.zeros(self.n_docs, dtype=np.int64)
        # Pass 1, a chunk of documents at a time: distinct term ids (int32) and counts (uint16: a term repeats
        # fewer than 65,536 times in a context) per posting, so the per-document arrays die with their chunk.
        chunks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        for first in range(0, self.n_docs, BUILD_CHUNK):
            rows = [next(documents) for _ in range(min(BUILD_CHUNK, self.n_docs - first))]
            self.doc_len[first : first + len(rows)] = [r[0] for r in rows]
            per_doc = np.fromiter((len(r[1]) for r in rows), np.int64, len(rows))
            term = np.concatenate([r[1] for r in rows]).astype(np.int32) if rows else np.zeros(0, np.int32)
            tf = np.concatenate([r[2] for r in rows]).astype(np.uint16) if rows else np.zeros(0, np.uint16)
            chunks.append((first, per_doc, term, tf))
        self.vocab = vocab
        self.doc_freq = np.zeros(len(vocab), dtype=np.int64)  # in these documents
        for _, _, term, _ in chunks:
            self.doc_freq += np.bincount(term, minlength=len(vocab))
        self.statistics = statistics or BM25Statistics(vocab, self.doc_freq, self.n_docs, int(self.doc_len.sum()))
        self.idf = self._idf(self.statistics)
        self.dense_row = np.full(len(vocab), -1, dtype=np.int32)
        dense_terms = np.flatnonzero(self.doc_freq >= max(DENSE_SHARE * self.n_docs, 1))
        self.dense_row[dense_terms] = np.arange(len(dense_terms))
        self.dense = np.zeros((len(dense_terms), self.n_docs))
        # Pass 2, chunk by chunk (each freed once used): weights; dense terms' go into their rows, the others stay
        # postings (term, document, weight) until one term-major CSR is made of them.
        sparse_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        while chunks:
            first, per_doc, term, tf = chunks.pop(0)
            doc = np.repeat(np.arange(first, first + len(per_doc), dtype=np.int32), per_doc)
            weight = self._weights(term, tf, doc)
            rows = self.dense_row[term]
            held = rows >= 0
            self.dense[rows[held], doc[held]] = weight[held]
            sparse_parts.append((term[~held], doc[~held], weight[~held]))
            del term, tf, doc, weight, rows, held
        self.sparse = _term_major(sparse_parts, len(vocab), self.n_docs)
        self._doc_blocks: list[DocBlock] | None = None

    def _weights(self, term: np.ndarray, tf: np.ndarray, doc: np.ndarray) -> np.ndarray:
        """Each posting's BM25 weight, with rank_bm25's float operations."""
        p = self.params
        avgdl = self.statistics.total_length / max(self.statistics.n_docs, 1)
        dl = self.doc_len[doc].astype(np.float64)
        f = tf.astype(np.float64)
        return self.idf[term] * (f * (p.k1 + 1) / (f + p.k1 * (1 - p.b + p.b * dl / avgdl)))

    def _idf(self, statistics: BM25Statistics) -> np.ndarray:
        n = statistics.n_docs
        doc_freq = statistics.doc_freq.tolist()
        idf = np.array([math.log(n - f + 0.5) - math.log(f + 0.5) for f in doc_freq], dtype=np.float64)
        if len(idf) == 0:
            return idf
        mean_idf = sum(idf.tolist()) / len(idf)  # Python's left-to-right sum, as rank_bm25 does
        return np.where(idf < 0, self.params.epsilon * mean_idf, idf)

    @property
    def index_bytes(self) -> int:
        """Memory held by the weights (postings, dense rows, per-term and per-document arrays)."""
        s = self.sparse
        arrays = (s.data, s.indices, s.indptr, self.dense, self.dense_row, self.idf, self.doc_freq, self.doc_len)
        return sum(a.nbytes for a in arrays)

    def term_weights(self, term: int) -> np.ndarray:
        """One term's weight in every document (dense; for checks)."""
        if self.dense_row[term] >= 0:
            return self.dense[self.dense_row[term]].copy()
        row = np.zeros(self.n_docs)
        s, e = self.sparse.indptr[term], self.sparse.indptr[term + 1]
        row[self.sparse.indices[s:e]] = self.sparse.data[s:e]
        return row

    def query_terms(self, queries: Sequence[str], left_out: Sequence[frozenset[str]] | None = None) -> list[list[int]]:
        """Per query, the ids of its known terms in query order, a repeated term once per occurrence, without the
        terms `left_out` of it (one set per query)."""
        vocab = self.vocab
        left_out = [frozenset()] * len(queries) if left_out is None else left_out
        return [
            [vocab[t] for t in self.tokenizer(q) if t in vocab and t not in out]
            for q, out in zip(queries, left_out, strict=True)
        ]

    def scores(self, queries: Sequence[str], left_out: Sequence[frozenset[str]] | None = None) -> np.ndarray:
        """Dense (queries x documents) BM25 scores (for fusion over every document, and for tests), each query
        scored without the terms `left_out` of it."""
        whole = DocBlock(0, self.sparse, self.dense)
        terms = self.query_terms(queries, left_out)
        return block_scores(whole, terms, self.dense_row) if terms else np.zeros((0, self.n_docs))

    def top_k(self, queries: Sequence[str], k: int, threads: int = 2) -> tuple[np.ndarray, np.ndarray]:
        """Indices and scores of the k best documents per query (ties: corpus order), as `top_n` over the dense
        scores would give, without making them: blocks of queries run in `threads` threads (numpy's adds release
        the GIL), each keeping a running top k across document blocks."""
        k = min(k, self.n_docs)
        terms = self.query_terms(queries)
        if not terms or k == 0:
            return np.full((len(terms), k), -1, np.int64), np.full((len(terms), k), np.nan)
        blocks = self.doc_blocks()
        step = max(1, BLOCK_VALUES // blocks[0].width)
        spans = [terms[start : start + step] for start in range(0, len(terms), step)]

        def one(span: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
            best = None
            for block in blocks:
                best = merge_top_k(best, block_scores(block, span, self.dense_row), block.first, k)
            return best

        if threads > 1 and len(spans) > 1:
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bm25") as pool:
                parts = list(pool.map(one, spans))
        else:
            parts = [one(span) for span in spans]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def doc_blocks(self) -> list[DocBlock]:
        """The weights in blocks of DOC_BLOCK documents, made once (dense rows are views)."""
        if self._doc_blocks is None:
            if self.n_docs <= DOC_BLOCK:
                self._doc_blocks = [DocBlock(0, self.sparse, self.dense)]
            else:
                self._doc_blocks = [
                    DocBlock(s, self.sparse[:, s : s + DOC_BLOCK].tocsr(), self.dense[:, s : s + DOC_BLOCK])
                    for s in range(0, self.n_docs, DOC_BLOCK)
                ]
        return self._doc_blocks


def block_scores(block: DocBlock, terms: list[list[int]], dense_row: np.ndarray) -> np.ndarray:
    """(queries x block documents) scores: each query's term weights added one occurrence at a time, in query
    order, from 0.0 (a dense row adds 0.0 where a document lacks the term, which changes nothing)."""
    out = np.zeros((len(terms), block.width))
    indptr, indices, data = block.sparse.indptr, block.sparse.indices, block.sparse.data
    for row, query in zip(out, terms, strict=True):
        for t in query:
            r = dense_row[t]
            if r >= 0:
                row += block.dense[r]
            else:
                s, e = indptr[t], indptr[t + 1]
                row[indices[s:e]] += data[s:e]  # a posting list names each document once
    return out


def merge_top_k(
    best: tuple[np.ndarray, np.ndarray] | None, scores: np.ndarray, first: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The running top k (score descending, then document) after one more document block. Its documents come
    after every earlier one, so a score equal to the k-th held never displaces it."""
    queries, width = scores.shape
    if best is None:
        index, value = np.full((queries, k), -1, np.int64), np.full((queries, k), np.nan)
        if width > k:
            kth = np.partition(scores, width - k, axis=1)[:, width - k]  # the k-th largest per row
            rows, cols = np.nonzero(scores >= kth[:, None])  # with every tie at the k-th
        else:
            rows, cols = np.divmod(np.arange(queries * width), width)
    else:
        index, value = best
        threshold = np.where(index[:, -1] >= 0, value[:, -1], -np.inf)
        rows, cols = np.nonzero(scores > threshold[:, None])
        if len(rows) == 0:
            return best
    held = index >= 0
    all_rows = np.concatenate([np.nonzero(held)[0], rows])
    all_docs = np.concatenate([index[held], cols + first])
    all_values = np.concatenate([value[held], scores[rows, cols]])
    order = np.lexsort((all_docs, -all_values, all_rows))
    all_rows, all_docs, all_values = all_rows[order], all_docs[order], all_values[order]
    rank = np.arange(len(all_rows)) - np.searchsorted(all_rows, all_rows)
    keep = rank < k
    index, value = np.full_like(index, -1), np.full_like(value, np.nan)
    index[all_rows[keep], rank[keep]] = all_docs[keep]
    value[all_rows[keep], rank[keep]] = all_values[keep]
    return index, value
