"""Corpora that grow: a subset's corpus extended with distractor contexts, real or synthetic.

Real distractors come from another source in the same layout (a local directory, a parquet tree, an `s3://` prefix:
every subset and split in it), pooled and deduplicated by context id. Synthetic ones are for timing only: each
draws its length from the bundled real contexts' lengths and its tokens from their unigram distribution (seeded),
so BM25 posting lists look like real ones, and every synthetic context id starts with `SYNTHETIC_PREFIX` (outputs
built on them say so and stay out of quality tables).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from t2rag.data.corpus import Corpus, build_corpora, build_corpus
from t2rag.data.load import load_questions
from t2rag.tokenize import whitespace_tokenize

SYNTHETIC_PREFIX = "synthetic-"


def load_distractors(source: str) -> Corpus:
    """Every context of a source in the T2-RAGBench layout, pooled (first text kept per context id)."""
    corpus = build_corpus(load_questions(source), None)
    return Corpus(f"distractors:{source}", corpus.context_ids, corpus.subsets, corpus.texts, metadata=corpus.metadata)


#: Synthetic contexts drawn from one random stream: context i of a seed is drawn by chunk i // SYNTHETIC_CHUNK's
#: stream, so any range of them can be made on its own (a shard of a million-context corpus, in its own task).
SYNTHETIC_CHUNK = 10_000


@lru_cache(maxsize=1)
def _unigrams() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bundled real contexts' vocabulary, its cumulative unigram distribution and their lengths (in tokens)."""
    contexts = [t for corpus in build_corpora(load_questions(None)).values() for t in corpus.texts]
    tokens = [whitespace_tokenize(t) for t in contexts]
    vocab, counts = np.unique(np.concatenate([np.array(t, dtype=object) for t in tokens]), return_counts=True)
    return vocab, np.cumsum(counts / counts.sum()), np.array([len(t) for t in tokens])


def synthetic_contexts(n: int, seed: int = 0, first: int = 0) -> Corpus:
    """Timing-only contexts `first` .. `first + n - 1` of a seed: real tokens resampled, the same contexts whichever
    range they are made in."""
    vocab, cumulative, real_lengths = _unigrams()
    texts: list[str] = []
    for chunk in range(first // SYNTHETIC_CHUNK, -(-(first + n) // SYNTHETIC_CHUNK)):
        rng = np.random.default_rng([seed, chunk])
        lengths = rng.choice(real_lengths, size=SYNTHETIC_CHUNK)
        start = chunk * SYNTHETIC_CHUNK
        low, high = max(first, start) - start, min(first + n, start + SYNTHETIC_CHUNK) - start
        ids = np.minimum(np.searchsorted(cumulative, rng.random(int(lengths[:high].sum()))), len(vocab) - 1)
        ends = np.cumsum(lengths[:high])
        texts += [" ".join(vocab[ids[e - m : e]]) for e, m in zip(ends[low:], lengths[low:high], strict=True)]
    ids = tuple(f"{SYNTHETIC_PREFIX}{seed}-{i}" for i in range(first, first + n))
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
