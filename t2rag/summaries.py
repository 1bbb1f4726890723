"""Generated context summaries, stored next to the vector indexes (LanceDB, local or s3://) and reused.

A summary set is keyed by the corpus fingerprint, the generator's engine and model, the summarisation template
and its token budget, so any change produces a new set rather than silently reusing stale text.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

from t2rag.data.corpus import Corpus
from t2rag.generation.config import GeneratorConfig
from t2rag.prompts import Prompts
from t2rag.retrieval.vector_store import VectorStore


def summary_key(corpus: Corpus, generator: GeneratorConfig, prompts: Prompts) -> str:
    raw = "|".join(
        [
            corpus.fingerprint,
            generator.engine,
            generator.model,
            generator.quantization or "",
            prompts.templates["summarize"],
            str(prompts.config.summary_max_tokens),
            str(prompts.config.max_context_chars),
        ]
    )
    return f"summaries-{corpus.fingerprint}-{hashlib.sha256(raw.encode()).hexdigest()[:12]}"


def load_summaries(store: VectorStore, key: str, corpus: Corpus) -> list[str] | None:
    """The stored summaries in corpus order, or None when the set is missing or incomplete."""
    if not store.has_table(key, len(corpus)):
        return None
    table = store.db.open_table(key).to_arrow()
    text_of = dict(zip(table.column("context_id").to_pylist(), table.column("text").to_pylist(), strict=True))
    if any(cid not in text_of for cid in corpus.context_ids):
        return None
    return [text_of[cid] for cid in corpus.context_ids]


def save_summaries(store: VectorStore, key: str, corpus: Corpus, texts: list[str]) -> None:
    table = pa.table({"context_id": list(corpus.context_ids), "text": texts})
    store.db.create_table(key, data=table, mode="overwrite")
