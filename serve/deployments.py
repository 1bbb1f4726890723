"""The worker deployments: query embedder, one retriever per method, and the generator.

Each calls the core stages (t2rag.stages) on the requests that reach a replica together, gathered by
`@serve.batch`: concurrent queries share one `embed_queries` call, one block search per corpus, and one generator
batch. A retriever runs its method's ranking stages after query embedding (which the Embedder deployment does, so it
can sit on a GPU); the ingress runs the answering stages.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from filelock import FileLock
from ray import serve
from ray.serve.handle import DeploymentHandle

from serve.settings import ServeSettings, corpus_names
from t2rag.config import RunConfig
from t2rag.data import Corpus
from t2rag.errors import InputError
from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.config import GeneratorConfig, build_generator
from t2rag.generation.requests import GENERATION_COLUMNS, request_row
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval.vector_store import default_index_uri
from t2rag.stages import STAGES
from t2rag.stages.embed import EmbedQueries, vector_column, vectors_of
from t2rag.stages.generate import Generate

log = logging.getLogger(__name__)

WARM_UP_TEXT = "What was the total revenue?"
WARM_UP_REQUEST = ChatRequest(({"role": "user", "content": "Hi"},), SamplingParams(max_tokens=1))

# Module-level helpers come before the deployment classes: Serve pickles a class when it is decorated.


def index_lock(config: RunConfig) -> FileLock:
    """A machine-wide lock for building the indexes at one location."""
    uri = config.retrieval.index_uri or default_index_uri()
    digest = hashlib.sha256(uri.encode()).hexdigest()[:16]
    return FileLock(Path(tempfile.gettempdir()) / f"t2rag-index-{digest}.lock")


@serve.deployment(name="Embedder")
class EmbedderDeployment:
    """The `embed_queries` stage for the dense retrievers; blocks that arrive together are encoded in one call."""

    def __init__(self, config: RunConfig, settings: ServeSettings):
        self.stage = EmbedQueries(Resources(config))
        self.embed.set_max_batch_size(settings.max_batch_size)
        self.embed.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        self.stage(pa.table({"question": [WARM_UP_TEXT]}))

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def embed(self, blocks: list[list[str]]) -> list[np.ndarray]:
        """Query vectors for each block, in order (one handle call passes one block)."""
        batch = pa.table({"question": [text for block in blocks for text in block]})
        vectors = vectors_of((await asyncio.to_thread(self.stage, batch)).column("query_vector"))
        return np.split(vectors, np.cumsum([len(block) for block in blocks])[:-1])

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""


@dataclass(frozen=True)
class Query:
    """One retrieval request as it waits in a batch."""

    text: str
    corpus: str
    k: int
    texts: bool  # return each context's text too


def ranked_rows(batch: pa.Table, corpus: Corpus, with_text: list[bool]) -> list[list[dict[str, Any]]]:
    """The ranked contexts of each row, cut at its k, best first."""
    position = corpus.positions
    out = []
    for ids, scores, k, text in zip(
        batch.column("context_ids").to_pylist(),
        batch.column("scores").to_pylist(),
        batch.column("k").to_pylist(),
        with_text,
        strict=True,
    ):
        rows = []
        for cid, score in list(zip(ids, scores, strict=True))[:k]:
            i = position[cid]
            row = {"context_id": cid, "subset": corpus.subsets[i], "score": score if math.isfinite(score) else None}
            if text:
                row["text"] = corpus.texts[i]
            rows.append(row)
        out.append(rows)
    return out


@serve.deployment(name="Retriever")
class RetrieverDeployment:
    """One method's ranking stages over every loaded corpus, indexed at start-up exactly as the batch job indexes."""

    async def __init__(
        self, config: RunConfig, method: str, embedder: DeploymentHandle | None, settings: ServeSettings
    ):
        self.method = get_method(method)
        self.resources = Resources(config)
        self.embedder = embedder
        self.corpora = corpus_names(self.resources.questions.subsets)
        self.stages = [STAGES[name](self.resources) for name in self.method.stages if name != "embed_queries"]
        await asyncio.to_thread(self._build_indexes)
        self._search.set_max_batch_size(settings.max_batch_size)
        self._search.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        await self.retrieve(WARM_UP_TEXT, self.corpora[0], 1)  # loads what loads lazily (e.g. a cross-encoder)

    def _build_indexes(self) -> None:
        # Replicas of several methods share dense tables on disk: one builds, the others wait and reuse.
        with index_lock(self.resources.config):
            for name in self.corpora:
                self.resources.retriever(self.method, name)

    async def retrieve(self, question: str, corpus: str, k: int, texts: bool = True) -> list[dict[str, Any]]:
        """The top-k contexts for one question, best first (with their texts unless `texts` is false)."""
        result = await self._search(Query(question, corpus, k, texts))
        if isinstance(result, Exception):
            raise result
        return result

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def _search(self, queries: list[Query]) -> list[list[dict[str, Any]] | Exception]:
        """Search a batch as one block per corpus; a failing corpus fails only its own requests."""
        groups: dict[str, list[int]] = {}
        for position, query in enumerate(queries):
            groups.setdefault(query.corpus, []).append(position)
        results: list[list[dict[str, Any]] | Exception] = [[] for _ in queries]
        for corpus, members in groups.items():
            try:
                ranked = await self._search_block([queries[i] for i in members], corpus)
            except Exception as exc:
                log.warning("%s: search of %d queries on %s failed: %r", self.method.name, len(members), corpus, exc)
                ranked = [exc] * len(members)
            for position, row in zip(members, ranked, strict=True):
                results[position] = row
        return results

    async def _search_block(self, queries: list[Query], corpus: str) -> list[list[dict[str, Any]]]:
        if corpus not in self.corpora:
            raise InputError(f"unknown corpus '{corpus}' (served: {', '.join(self.corpora)})")
        texts = [q.text for q in queries]
        batch = pa.table(
            {
                "question": texts,
                "subset": [corpus] * len(queries),
                "method": [self.method.name] * len(queries),
                "k": pa.array([q.k for q in queries], pa.int64()),
            }
        )
        if "embed_queries" in self.method.stages:
            if self.embedder is None:
                raise RuntimeError(f"method {self.method.name} needs query vectors but has no embedder")
            vectors = await self.embedder.embed.remote(texts)
            batch = batch.append_column("query_vector", vector_column(vectors))
        batch = await asyncio.to_thread(self._rank, batch)
        searched = self.resources.index_corpus(self.method, corpus)
        return ranked_rows(batch, searched, [q.texts for q in queries])

    def _rank(self, batch: pa.Table) -> pa.Table:
        for stage in self.stages:
            batch = stage(batch)
        return batch

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""


@serve.deployment(name="Generator")
class GeneratorDeployment:
    """The `generate` stage over the configured local or HTTP engine; requests that arrive together go in one call."""

    def __init__(self, generator: GeneratorConfig, settings: ServeSettings):
        engine = build_generator(generator, cache=False)
        self.stage = Generate(Resources(RunConfig(generator=generator), generator=engine))
        batch_size = settings.generator_batch_size or (1 if generator.engine == "llamacpp" else generator.concurrency)
        self.generate.set_max_batch_size(batch_size)
        self.generate.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        if generator.engine == "llamacpp":  # load the weights now rather than on the first request
            self.stage(pa.Table.from_pylist([request_row(WARM_UP_REQUEST)]))

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0.005)
    async def generate(self, requests: list[dict[str, str]]) -> list[dict[str, Any]]:
        """Generation columns for each request row (`messages_json`, `params_json`), in order; engine failures
        come back in `generation_error`."""
        out = await asyncio.to_thread(self.stage, pa.Table.from_pylist(requests))
        return out.select(list(GENERATION_COLUMNS)).to_pylist()

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""

    def __del__(self) -> None:
        stage = getattr(self, "stage", None)
        if stage is not None:
            stage.resources.close()
