"""Corpora that grow: a subset's corpus extended with distractor contexts, real or synthetic.

Real distractors come from another source in the same layout (a local directory, a parquet tree, an `s3://` prefix:
every subset and split in it), pooled and deduplicated by context id. Synthetic ones are for timing only: each
draws its length from the bundled real contexts' lengths and its tokens from their unigram distribution (seeded),
so BM25 posting lists look like real ones, and every synthetic context id starts with `SYNTHETIC_PREFIX` (outputs
built on them say so and stay out of quality tables).
"""

from __future__ import annotations

import numpy as np

from t2rag.data.corpus import Corpus, build_corpora, build_corpus
from t2rag.data.load import load_questions
from t2rag.tokenize import whitespace_tokenize

SYNTHETIC_PREFIX = "synthetic-"


def load_distractors(source: str) -> Corpus:
    """Every context of a source in the T2-RAGBench layout, pooled (first text kept per context id)."""
    corpus = build_corpus(load_questions(source), None)
    return Corpus(f"distractors:{source}", corpus.context_ids, corpus.subsets, corpus.texts, metadata=corpus.metadata)


def synthetic_contexts(n: int, seed: int = 0) -> Corpus:
    """n timing-only contexts of real tokens resampled (deterministic for a seed)."""
    contexts = [t for corpus in build_corpora(load_questions(None)).values() for t in corpus.texts]
    tokens = [whitespace_tokenize(t) for t in contexts]
    vocab, counts = np.unique(np.concatenate([np.array(t, dtype=object) for t in tokens]), return_counts=True)
    rng = np.random.default_rng(seed)
    lengths = rng.choice([len(t) for t in tokens], size=n)
    cumulative = np.cumsum(counts / counts.sum())
    texts: list[str] = []
    for first in range(0, n, 10_000):  # a chunk at a time: token ids for a million contexts would take gigabytes
        chunk = lengths[first : first + 10_000]
        ids = np.minimum(np.searchsorted(cumulative, rng.random(int(chunk.sum()))), len(vocab) - 1)
        ends = np.cumsum(chunk)
        texts += [" ".join(vocab[ids[e - m : e]]) for e, m in zip(ends, chunk, strict=True)]
    ids = tuple(f"{SYNTHETIC_PREFIX}{seed}-{i}" for i in range(n))
    return Corpus(f"synthetic-{seed}", ids, ("synthetic",) * n, tuple(texts))


def extend(corpus: Corpus, distractors: Corpus, count: int | None = None, seed: int | None = None) -> Corpus:
    """The corpus followed by `count` distractors (all when None) it does not already hold: the first ones, or a
    seeded random choice when `seed` is given. Its own documents keep their positions."""
    own = set(corpus.context_ids)
    fresh = [i for i, cid in enumerate(distractors.context_ids) if cid not in own]
    if count is not None and count < len(fresh):
        fresh = (
            sorted(np.random.default_rng(seed).choice(fresh, count, replace=False).tolist())
            if seed is not None
            else fresh[:count]
        )
    return corpus + distractors.select(fresh)
