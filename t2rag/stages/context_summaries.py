"""Context summaries (LLM-written digests of each context) for the summary-indexed methods (summarization,
sumcontext): prompts, generation and storage.

Summaries are a corpus-side step: every context of a corpus is summarised once by the run's generator and the set
is stored next to the vector indexes (LanceDB, local or s3://), batch by batch as they finish, keyed by the corpus
fingerprint, the generator's engine and model, the template and its token budget, so any change produces a new set
instead of stale text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.data.corpus import Corpus
from t2rag.generation.requests import free_text_requests
from t2rag.resources import Resources
from t2rag.retrieval.vector_store import VectorStore
from t2rag.stages.base import Stage, with_columns
from t2rag.stages.generate import Generate

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


class SummariesIncomplete(RuntimeError):
    """Some summaries of a corpus failed; the stored ones are kept and the next attempt generates the rest."""


def stored_context_summaries(store: VectorStore, key: str) -> dict[str, str]:
    """The summaries stored so far under `key`, by context id (a set may be partial: it grows as they finish)."""
    if not store.exists(key):
        return {}
    table = store.db.open_table(key).to_arrow()
    return dict(zip(table.column("context_id").to_pylist(), table.column("text").to_pylist(), strict=True))


def ensure_context_summaries(
    resources: Resources, corpus: Corpus, generate: Callable[[pa.Table], Iterable[pa.Table]] | None = None
) -> Corpus:
    """The corpus with every context replaced by its summary; the ones not stored yet are generated and stored as
    each batch finishes, so a fault loses only the batches in flight. Failed generations are not stored: they raise
    `SummariesIncomplete` after the rest are stored, for the run's next attempt (or rerun) to retry.

    `generate` runs the generation stage over a table of request rows and yields the generated batches as they
    finish (a Ray job passes its generator service); by default the stage runs in this process, CHUNK contexts per
    call.
    """
    store = VectorStore(resources.config.retrieval.index_uri)
    key = context_summary_key(resources, corpus)
    stored = stored_context_summaries(store, key)
    missing = [i for i, cid in enumerate(corpus.context_ids) if cid not in stored]
    failed = 0
    if missing:
        texts = list(corpus.texts)
        rows = ContextSummaryPrompts(resources)(pa.table({"doc": missing, "text": [texts[i] for i in missing]}))
        ids = corpus.context_ids
        for part in generate(rows) if generate is not None else _generate_here(resources, rows, corpus):
            ok = pc.is_null(part.column("generation_error"))
            failed += part.num_rows - int(pc.sum(ok).as_py() or 0)
            done = part.filter(ok)
            if done.num_rows == 0:
                continue
            docs, outputs = done.column("doc").to_pylist(), done.column("raw_output").to_pylist()
            new = {ids[d]: (t or "").strip() for d, t in zip(docs, outputs, strict=True)}
            table = pa.table({"context_id": list(new), "text": list(new.values())})
            if store.exists(key):
                store.db.open_table(key).add(table)
            else:
                store.db.create_table(key, data=table, mode="overwrite")
            stored.update(new)
    if failed:
        raise SummariesIncomplete(
            f"{failed} of {len(corpus)} context summaries of {corpus.name} failed ({len(stored)} stored); "
            "the next attempt generates them"
        )
    return corpus.with_texts([stored[cid] for cid in corpus.context_ids], name=f"{corpus.name}-summaries")


def _generate_here(resources: Resources, rows: pa.Table, corpus: Corpus) -> Iterator[pa.Table]:
    stage = Generate(resources)
    for start in range(0, rows.num_rows, CHUNK):
        part = rows.slice(start, CHUNK)
        done = f"{start + part.num_rows}/{rows.num_rows}"
        with resources.log.stage("summarize", part.num_rows, done=done, corpus=corpus.name):
            yield stage(part)
