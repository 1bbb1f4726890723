"""The worker deployments: query embedder, one retriever per method, and the generator.

Each wraps the t2rag object that does the work (`RAGSystem.embedder`, `RAGSystem.retriever(...)`, the configured
generation engine) and adds only batching: `@serve.batch` gathers the requests that reach a replica together, so
concurrent queries share one embedding call, one block search per (corpus, k), and one generator batch.
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
from filelock import FileLock
from ray import serve
from ray.serve.handle import DeploymentHandle

from serve.settings import ServeSettings, corpus_names
from t2rag.config import RunConfig
from t2rag.data import Corpus
from t2rag.errors import InputError
from t2rag.generation.base import ChatRequest, Generation, SamplingParams
from t2rag.generation.config import GeneratorConfig, build_generator
from t2rag.methods import get_method
from t2rag.retrieval import Hits, QueryBlock, Retriever
from t2rag.retrieval.vector_store import default_index_uri
from t2rag.system import RAGSystem

log = logging.getLogger(__name__)

WARM_UP_TEXT = "What was the total revenue?"

# Module-level helpers come before the deployment classes: Serve pickles a class when it is decorated.


def ranked_contexts(hits: Hits, corpus: Corpus, k: int) -> list[list[dict[str, Any]]]:
    """The first k hits of every query as context records, best first (padding dropped)."""
    out = []
    for positions, scores in zip(hits.indices, hits.scores, strict=True):
        kept = [(int(i), float(s)) for i, s in zip(positions, scores, strict=True) if i >= 0][:k]
        out.append(
            [
                {
                    "context_id": corpus.context_ids[i],
                    "subset": corpus.subsets[i],
                    "score": score if math.isfinite(score) else None,
                    "text": corpus.texts[i],
                }
                for i, score in kept
            ]
        )
    return out


def index_lock(config: RunConfig) -> FileLock:
    """A machine-wide lock for building the indexes at one location."""
    uri = config.retrieval.index_uri or default_index_uri()
    digest = hashlib.sha256(uri.encode()).hexdigest()[:16]
    return FileLock(Path(tempfile.gettempdir()) / f"t2rag-index-{digest}.lock")


@serve.deployment(name="Embedder")
class EmbedderDeployment:
    """Embeds query blocks for the dense retrievers; blocks that arrive together are encoded in one call."""

    def __init__(self, config: RunConfig, settings: ServeSettings):
        self.embedder = RAGSystem(config).embedder
        self.embed.set_max_batch_size(settings.max_batch_size)
        self.embed.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        self.embedder.embed_queries([WARM_UP_TEXT])

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def embed(self, blocks: list[list[str]]) -> list[np.ndarray]:
        """Query vectors for each block, in order (one handle call passes one block)."""
        texts = [text for block in blocks for text in block]
        vectors = await asyncio.to_thread(self.embedder.embed_queries, texts)
        return np.split(vectors, np.cumsum([len(block) for block in blocks])[:-1])

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""


@dataclass(frozen=True)
class Query:
    """One retrieval request as it waits in a batch."""

    text: str
    corpus: str
    k: int


@serve.deployment(name="Retriever")
class RetrieverDeployment:
    """One method's retriever over every loaded corpus, indexed at start-up exactly as the batch job indexes it."""

    async def __init__(
        self, config: RunConfig, method: str, embedder: DeploymentHandle | None, settings: ServeSettings
    ):
        self.method = get_method(method)
        self.system = RAGSystem(config)
        self.embedder = embedder
        self.corpora = corpus_names(self.system.questions.subsets)
        self.retrievers: dict[str, Retriever] = {}
        await asyncio.to_thread(self._build_indexes)
        self._search.set_max_batch_size(settings.max_batch_size)
        self._search.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        await self.retrieve(WARM_UP_TEXT, self.corpora[0], 1)  # loads what loads lazily (e.g. a cross-encoder)

    def _build_indexes(self) -> None:
        # Replicas of several methods share dense tables on disk: one builds, the others wait and reuse.
        with index_lock(self.system.config):
            for name in self.corpora:
                self.retrievers[name] = self.system.retriever(self.method, name)

    async def retrieve(self, question: str, corpus: str, k: int) -> list[dict[str, Any]]:
        """The top-k contexts for one question, best first."""
        result = await self._search(Query(question, corpus, k))
        if isinstance(result, Exception):
            raise result
        return result

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def _search(self, queries: list[Query]) -> list[list[dict[str, Any]] | Exception]:
        """Search a batch as one block per (corpus, k); a failing group fails only its own requests."""
        groups: dict[tuple[str, int], list[int]] = {}
        for position, query in enumerate(queries):
            groups.setdefault((query.corpus, query.k), []).append(position)
        results: list[list[dict[str, Any]] | Exception] = [[] for _ in queries]
        for (corpus, k), members in groups.items():
            try:
                ranked = await self._search_block([queries[i].text for i in members], corpus, k)
            except Exception as exc:
                log.warning("%s: search of %d queries on %s failed: %r", self.method.name, len(members), corpus, exc)
                ranked = [exc] * len(members)
            for position, row in zip(members, ranked, strict=True):
                results[position] = row
        return results

    async def _search_block(self, texts: list[str], corpus: str, k: int) -> list[list[dict[str, Any]]]:
        retriever = self.retrievers.get(corpus)
        if retriever is None:
            raise InputError(f"unknown corpus '{corpus}' (served: {', '.join(self.retrievers)})")
        vectors = None
        if retriever.needs_query_vectors:
            if self.embedder is None:
                raise RuntimeError(f"method {self.method.name} needs query vectors but has no embedder")
            vectors = await self.embedder.embed.remote(texts)
        hits = await asyncio.to_thread(retriever.search, QueryBlock(texts, vectors), k)
        return ranked_contexts(hits, retriever.corpus, k)

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""


@serve.deployment(name="Generator")
class GeneratorDeployment:
    """The configured local or HTTP generation engine; requests that arrive together go in one `generate` call."""

    def __init__(self, generator: GeneratorConfig, settings: ServeSettings):
        self.engine = build_generator(generator, cache=False)
        batch_size = settings.generator_batch_size or (1 if generator.engine == "llamacpp" else generator.concurrency)
        self.generate.set_max_batch_size(batch_size)
        self.generate.set_batch_wait_timeout_s(settings.batch_wait_timeout_s)
        if generator.engine == "llamacpp":  # load the weights now rather than on the first request
            self.engine.generate([ChatRequest(({"role": "user", "content": "Hi"},), SamplingParams(max_tokens=1))])

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0.005)
    async def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        """One Generation per request, in order; engine failures come back as `Generation.error`."""
        return await asyncio.to_thread(self.engine.generate, requests)

    def check_health(self) -> None:
        """Serve's liveness probe: answering at all is enough."""

    def __del__(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()
