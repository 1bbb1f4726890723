"""Context summaries (LLM-written digests of each context) for the summary-indexed methods (summarization,
sumcontext): prompts, generation and storage.

Summaries are a corpus-side step: every context of a corpus is summarised once by the run's generator and the set
is stored next to the vector indexes (LanceDB, local or s3://), keyed by the corpus fingerprint, the generator's
engine and model, the template and its token budget, so any change produces a new set instead of stale text.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from t2rag.data.corpus import Corpus
from t2rag.generation.requests import free_text_requests
from t2rag.resources import Resources
from t2rag.retrieval.vector_store import VectorStore
from t2rag.stages.base import Stage, with_columns
from t2rag.stages.generate import Generate

log = logging.getLogger(__name__)

#: Contexts summarised per generator call in one process (each call is one progress line).
CHUNK = 8


class ContextSummaryPrompts(Stage):
    """`text` (a context) -> `messages_json`, `params_json` asking for its summary."""

    name = "context_summary_prompts"

    def __call__(self, batch: pa.Table) -> pa.Table:
        prompts = self.resources.prompts
        messages = [prompts.summarize(t) for t in batch.column("text").to_pylist()]
        requests = free_text_requests(self.resources.generator_config, messages, prompts.config.summary_max_tokens)
        return with_columns(batch, requests)


def context_summary_key(resources: Resources, corpus: Corpus) -> str:
    generator, prompts = resources.generator_config, resources.prompts
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


def load_context_summaries(store: VectorStore, key: str, corpus: Corpus) -> list[str] | None:
    """The stored summaries in corpus order, or None when the set is missing or incomplete."""
    if not store.has_table(key, len(corpus)):
        return None
    table = store.db.open_table(key).to_arrow()
    text_of = dict(zip(table.column("context_id").to_pylist(), table.column("text").to_pylist(), strict=True))
    if any(cid not in text_of for cid in corpus.context_ids):
        return None
    return [text_of[cid] for cid in corpus.context_ids]


def context_summary_texts(generated: pa.Table) -> list[str]:
    """Summary texts in `doc` order; failed generations become empty texts (and are reported)."""
    generated = generated.sort_by("doc")
    errors = generated.column("generation_error").to_pylist()
    failed = sum(e is not None for e in errors)
    if failed:
        log.warning("%d of %d summaries failed; those contexts are indexed with an empty text", failed, len(errors))
    return [(t or "").strip() for t in generated.column("raw_output").to_pylist()]


def ensure_context_summaries(
    resources: Resources, corpus: Corpus, generate: Callable[[pa.Table], pa.Table] | None = None
) -> Corpus:
    """The corpus with every context replaced by its summary, generated and stored when not stored yet.

    `generate` runs the generation stage over a table of request rows (a Ray job passes its placed stage); by
    default the stage runs in this process, CHUNK contexts per call.
    """
    store = VectorStore(resources.config.retrieval.index_uri)
    key = context_summary_key(resources, corpus)
    texts = load_context_summaries(store, key, corpus)
    if texts is None:
        rows = ContextSummaryPrompts(resources)(pa.table({"doc": np.arange(len(corpus)), "text": list(corpus.texts)}))
        texts = context_summary_texts(
            generate(rows) if generate is not None else _generate_here(resources, rows, corpus)
        )
        table = pa.table({"context_id": list(corpus.context_ids), "text": texts})
        store.db.create_table(key, data=table, mode="overwrite")
    return corpus.with_texts(texts, name=f"{corpus.name}-summaries")


def _generate_here(resources: Resources, rows: pa.Table, corpus: Corpus) -> pa.Table:
    stage, parts = Generate(resources), []
    for start in range(0, rows.num_rows, CHUNK):
        part = rows.slice(start, CHUNK)
        done = f"{start + part.num_rows}/{rows.num_rows}"
        with resources.log.stage("summarize", part.num_rows, done=done, corpus=corpus.name):
            parts.append(stage(part))
    return pa.concat_tables(parts)
