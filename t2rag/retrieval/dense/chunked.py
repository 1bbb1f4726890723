"""Long-context dense retrieval: every chunk of a context embedded, a context scored by its best chunk (max-pool).

Chunks (`t2rag.retrieval.dense.chunking`) are stored in LanceDB like passages, each row's `doc` naming its context. A
search asks for enough chunk rows that `n` distinct contexts are certain to be among them (n times the most chunks
any context has), and a context's score is its first, i.e. best, chunk's: the exact max-pool of all chunk scores.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.base import DensePassages, Hits
from t2rag.retrieval.dense.chunking import ChunkingConfig, Chunks, chunk_texts, whitespace_counts
from t2rag.retrieval.dense.embedder import EmbedderConfig
from t2rag.retrieval.dense.hashing_embedder import HASHING_MODEL
from t2rag.retrieval.dense.retriever import DenseRetriever
from t2rag.retrieval.dense.vector_store import AnnConfig, table_name

#: The window assumed for an embedder without a tokenizer (the hashing embedder), in whitespace words.
WORDS_WITHOUT_TOKENIZER = 256


@lru_cache(maxsize=2)
def _chunks(fingerprint: str, texts: tuple[str, ...], embedder: EmbedderConfig, config: ChunkingConfig) -> Chunks:
    count, window = whitespace_counts, embedder.max_seq_length or WORDS_WITHOUT_TOKENIZER
    if embedder.model != HASHING_MODEL:
        from t2rag.retrieval.dense.embed_tokenizer import EmbedTokenizer

        tokenizer = EmbedTokenizer(embedder)
        template = tokenizer.passage_template.format(text="")
        window = tokenizer.max_length - 2 - len(tokenizer.tokenizer(template, add_special_tokens=False)["input_ids"])

        def count(lines: list[str]) -> list[int]:
            return [
                len(ids) for ids in tokenizer.tokenizer(lines, add_special_tokens=False, verbose=False)["input_ids"]
            ]

    return chunk_texts(texts, config.max_tokens or window, config.overlap_tokens, config.table_header, count)


def chunk_corpus(corpus: Corpus, embedder: EmbedderConfig, config: ChunkingConfig) -> tuple[Corpus, np.ndarray]:
    """The chunks of a corpus as a corpus of their own (each named by its context's id) and each one's context
    position."""
    chunks = _chunks(corpus.fingerprint, corpus.texts, embedder, config)
    ids = np.asarray(corpus.context_ids, dtype=object)[chunks.doc]
    subsets = np.asarray(corpus.subsets, dtype=object)[chunks.doc]
    passages = Corpus(f"{corpus.name}-{config.cache_key}", tuple(ids), tuple(subsets), tuple(chunks.texts))
    return passages, chunks.doc


def best_per_doc(indices: np.ndarray, scores: np.ndarray, n: int) -> Hits:
    """The first n distinct documents of each ranked row of chunk hits, each with its first (best) score."""
    q, width = indices.shape
    out_i = np.full((q, n), -1, dtype=np.int64)
    out_s = np.full((q, n), np.nan)
    if width == 0:
        return Hits(out_i, out_s)
    rows = np.repeat(np.arange(q), width)
    flat = indices.ravel()
    valid = flat >= 0
    key = rows[valid] * (int(flat.max()) + 1) + flat[valid]
    _, first = np.unique(key, return_index=True)
    keep = np.flatnonzero(valid)[np.sort(first)]  # first appearance of each (row, doc), in ranked order
    kr, kc = rows[keep], keep % width
    rank = np.arange(len(keep)) - np.searchsorted(kr, kr)
    ok = rank < n
    out_i[kr[ok], rank[ok]] = indices[kr[ok], kc[ok]]
    out_s[kr[ok], rank[ok]] = scores[kr[ok], kc[ok]]
    return Hits(out_i, out_s)


class ChunkedDenseRetriever(DenseRetriever):
    """Dense retrieval over overlapping chunks of every context, max-pooled to contexts."""

    name = "chunked"
    shardable = False

    def __init__(
        self,
        embedder: EmbedderConfig | None = None,
        index_uri: str | None = None,
        ann: AnnConfig | None = None,
        chunking: ChunkingConfig | None = None,
    ):
        super().__init__(embedder, index_uri, ann)
        self.chunking = chunking or ChunkingConfig()
        self.most_per_doc = 1
        self.n_chunks = 0

    def dense_passages(self, corpus: Corpus) -> list[DensePassages]:
        chunks, docs = chunk_corpus(corpus, self.embedder_config, self.chunking)
        return [DensePassages(table_name(chunks, self.embedder_config.cache_key), chunks, docs)]

    def on_table(self, plan: DensePassages) -> None:
        self.most_per_doc = int(np.bincount(plan.docs).max()) if len(plan.docs) else 1
        self.n_chunks = len(plan.docs)

    @property
    def index_info(self) -> dict:
        return {**super().index_info, "chunks": self.n_chunks, "most_chunks_per_context": self.most_per_doc}

    def search_vectors(self, vectors: np.ndarray, n: int) -> Hits:
        if self.table is None:
            raise RuntimeError("ChunkedDenseRetriever: call index(corpus) before search")
        rows = min(self.n_chunks, n * self.most_per_doc)
        return best_per_doc(*self.table.search(vectors, rows), n)
