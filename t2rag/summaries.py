"""Context summaries (LLM-written digests of each context) for the summary-indexed methods (summarization,
sumcontext): their requests, their generation and their storage.

Summaries are a corpus-side step: every context of a corpus is summarised once by the run's generator and the set
is stored next to the vector indexes (LanceDB, local or s3://), batch by batch as they finish, keyed by the corpus
fingerprint, the generator's engine and model, the template and its token budget, so any change produces a new set
instead of stale text. This module takes a corpus, a way to generate and a store; it knows nothing of runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.data.corpus import Corpus
from t2rag.generation.base import Generator
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.prefix import generate_shared
from t2rag.generation.registry import engine_of
from t2rag.generation.requests import free_text_requests, generation_columns, requests_of
from t2rag.progress import StageLog
from t2rag.prompts import Prompts
from t2rag.retrieval.dense.vector_store import VectorStore

#: Contexts summarised per generator call in one process (each call is one progress line).
CHUNK = 8

#: Request rows (`doc`, `text`, `messages_json`, `params_json`) in, generated rows (`doc`, `raw_output`,
#: `generation_error`, ...) out, batch by batch as they finish.
GenerateRows = Callable[[pa.Table], Iterable[pa.Table]]


class SummariesIncomplete(RuntimeError):
    """Some summaries of a corpus failed; the stored ones are kept and the next attempt generates the rest."""


def summary_key(corpus: Corpus, generator: GeneratorConfig, prompts: Prompts) -> str:
    """The storage key of a corpus' summaries: any change to what shapes a summary gives a new key."""
    raw = "|".join(
        [
            corpus.fingerprint,
            generator.engine,
            generator.model,
            engine_of(generator).variant(generator),
            prompts.templates["summarize"],
            str(prompts.config.summary_max_tokens),
            str(prompts.config.max_context_chars),
        ]
    )
    return f"summaries-{corpus.fingerprint}-{hashlib.sha256(raw.encode()).hexdigest()[:12]}"


def summary_requests(texts: list[str], generator: GeneratorConfig, prompts: Prompts) -> dict[str, pa.Array]:
    """`messages_json`, `params_json` asking for the summary of each text."""
    messages = [prompts.summarize(t) for t in texts]
    return free_text_requests(generator, messages, prompts.config.summary_max_tokens)


def stored_summaries(store: VectorStore, key: str) -> dict[str, str]:
    """The summaries stored so far under `key`, by context id (a set may be partial: it grows as they finish)."""
    if not store.exists(key):
        return {}
    table = store.db.open_table(key).to_arrow()
    return dict(zip(table.column("context_id").to_pylist(), table.column("text").to_pylist(), strict=True))


def in_chunks(generator: Generator, log: StageLog, corpus_name: str, reuse: bool = True) -> GenerateRows:
    """Generation in this process, CHUNK contexts per call, one progress line each (in prefix order with `reuse`)."""

    def generate(rows: pa.Table) -> Iterator[pa.Table]:
        for start in range(0, rows.num_rows, CHUNK):
            part = rows.slice(start, CHUNK)
            with log.stage("summarize", part.num_rows, done=f"{start + part.num_rows}/{rows.num_rows}",
                           corpus=corpus_name):  # fmt: skip
                columns = generation_columns(generate_shared(generator, requests_of(part), reuse))
            for name, values in columns.items():
                part = part.append_column(name, values)
            yield part

    return generate


def summarized(
    corpus: Corpus, generator: GeneratorConfig, prompts: Prompts, store: VectorStore, generate: GenerateRows
) -> Corpus:
    """The corpus with every context replaced by its summary; the ones not stored yet are generated and stored as
    each batch finishes, so a fault loses only the batches in flight. Failed generations are not stored: they raise
    `SummariesIncomplete` after the rest are stored, for the run's next attempt (or rerun) to retry."""
    key = summary_key(corpus, generator, prompts)
    stored = stored_summaries(store, key)
    missing = [i for i, cid in enumerate(corpus.context_ids) if cid not in stored]
    failed = 0
    if missing:
        texts = [corpus.texts[i] for i in missing]
        rows = pa.table({"doc": missing, "text": texts, **summary_requests(texts, generator, prompts)})
        ids = corpus.context_ids
        for part in generate(rows):
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
