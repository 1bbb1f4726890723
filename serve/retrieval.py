"""Retrieval inside the serving replica: every served method's ranking stages, query embedding included, over every
loaded corpus.

The requests queued together are ranked as one batch (the ingress keeps one queue per stage chain, see
serve/batcher.py); `rank` groups any batch by its methods' stage chains as the batch runners groups its work
(t2rag.stages.work), so the dense methods share one query-encoder call and each (method, corpus, k) is one block
search. A separate embedder and one retriever deployment per method would cost two extra Serve hops per request,
each about as much CPU as a whole trivial route (docs/performance.md); here a request costs one hop.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from filelock import FileLock

from serve.settings import corpus_names
from t2rag.config import RunConfig
from t2rag.data import Corpus
from t2rag.errors import InputError
from t2rag.methods import LLM_ROUTE, Method
from t2rag.resources import Resources
from t2rag.retrieval.dense.vector_store import default_index_uri
from t2rag.stages import built
from t2rag.stages.base import Stage, run_chain

WARM_UP_TEXT = "What was the total revenue?"


def index_lock(config: RunConfig) -> FileLock:
    """A machine-wide lock for building the indexes at one location."""
    uri = config.retrieval.index_uri or default_index_uri()
    digest = hashlib.sha256(uri.encode()).hexdigest()[:16]
    return FileLock(Path(tempfile.gettempdir()) / f"t2rag-index-{digest}.lock")


class DeadlineExceeded(Exception):
    """The request's deadline passed before its batch ran."""


@dataclass(frozen=True)
class Query:
    """One retrieval request as it waits for its batch."""

    question: str
    method: str
    corpus: str
    k: int
    texts: bool  # return each context's text too
    deadline: float  # time.monotonic() after which nobody waits for the answer
    queued: float = field(default_factory=time.monotonic)
    route_reply: str | None = None  # the LLM router's reply, asked through the app's generator before (`served_chain`)


@dataclass(frozen=True)
class Ranking:
    """One request's top-k contexts, best first, and seconds spent per step (its batch's, shared by the batch)."""

    contexts: list[dict[str, Any]]
    seconds: dict[str, float]
    corpus: str | None = None  # the corpus searched, where a router chose it (METHOD@ROUTER)


def served_chain(method: Method) -> tuple[str, ...]:
    """The stages a replica runs to rank for a method: an LLM router's prompt goes to the app's generator first (the
    ingress asks it), so that method's chain starts at `route`, which reads the reply."""
    if method.router == "llm":
        return method.stages[len(LLM_ROUTE) - 1 :]
    return method.stages


class RetrievalService:
    """The ranking stages of the served retrieving methods, built once per replica."""

    def __init__(self, resources: Resources, methods: Sequence[Method]):
        self.resources = resources
        self.methods = {m.name: m for m in methods if m.retrieves}
        self.corpora = corpus_names(resources.questions.subsets)
        #: Each served stage chain with its stages, built once (as a Ray stage actor builds its steps).
        self.chains: dict[tuple[str, ...], list[tuple[str, Stage]]] = {
            served_chain(m): built(resources, served_chain(m)) for m in self.methods.values()
        }

    def build(self) -> None:
        """Build (or open) every index and load every model, so the first request pays for none of it."""
        # Replicas share dense tables on disk: one builds, the others wait and reuse.
        with index_lock(self.resources.config):
            for method in self.methods.values():
                for corpus in self.corpora:
                    self.resources.retriever(method, corpus)
        warm = [Query(WARM_UP_TEXT, name, self.corpora[0], 1, False, math.inf) for name in self.methods]
        for result in self.rank(warm):
            if isinstance(result, Exception):
                raise result

    def rank(self, queries: Sequence[Query]) -> list[Ranking | Exception]:
        """Each query's ranking, in order; a query past its deadline, or whose group fails, gets its exception
        instead (a failure stays with its own queries)."""
        now = time.monotonic()
        results: list[Ranking | Exception | None] = [None] * len(queries)
        chains: dict[tuple[str, ...], list[int]] = {}
        for i, query in enumerate(queries):
            if query.deadline <= now:
                results[i] = DeadlineExceeded(f"the deadline passed after {now - query.queued:.3f} s in the queue")
            elif query.corpus not in self.corpora:
                results[i] = InputError(f"unknown corpus '{query.corpus}' (served: {', '.join(self.corpora)})")
            else:
                chains.setdefault(served_chain(self.methods[query.method]), []).append(i)
        for chain, members in chains.items():
            group = [queries[i] for i in members]
            try:
                rankings = self._rank_group(chain, group, now)
            except Exception as exc:
                rankings = [exc] * len(group)
            for i, ranking in zip(members, rankings, strict=True):
                results[i] = ranking
        return results  # type: ignore[return-value]  # every slot is filled above

    def _rank_group(self, chain: tuple[str, ...], queries: list[Query], started: float) -> list[Ranking]:
        batch = pa.table(
            {
                "question": [q.question for q in queries],
                "corpus": [q.corpus for q in queries],
                "method": [q.method for q in queries],
                "k": pa.array([q.k for q in queries], pa.int64()),
                **({"raw_output": [q.route_reply for q in queries]} if any(q.route_reply for q in queries) else {}),
            }
        )
        seconds: dict[str, float] = {}

        def timed(name: str, rows: int, took: float) -> None:
            seconds[name] = seconds.get(name, 0.0) + took

        batch = run_chain(self.chains[chain], batch, timed)
        searched = batch.column("corpus").to_pylist()  # a routed method's: the corpus its router chose
        rows = zip(batch.column("context_ids").to_pylist(), batch.column("scores").to_pylist(), searched, queries,
                   strict=True)  # fmt: skip
        return [
            Ranking(
                top_contexts(ids, scores, self.resources.index_corpus(self.methods[q.method], corpus), q.k, q.texts),
                {"queue": started - q.queued, **seconds},
                corpus,
            )
            for ids, scores, corpus, q in rows
        ]


def top_contexts(ids: list[str], scores: list[float], corpus: Corpus, k: int, texts: bool) -> list[dict[str, Any]]:
    """The first k ranked contexts as response rows (the text only when asked for)."""
    position = corpus.positions
    out = []
    for cid, score in list(zip(ids, scores, strict=True))[:k]:
        i = position[cid]
        row: dict[str, Any] = {
            "context_id": cid,
            "subset": corpus.subsets[i],
            "score": score if math.isfinite(score) else None,
        }
        if texts:
            row["text"] = corpus.texts[i]
        out.append(row)
    return out
