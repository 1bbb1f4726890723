"""RAGSystem: one configuration's corpora, indexes, retrievers, prompts and generator, built lazily and once.

This is the core every front end drives: the single-process evaluation, the Ray actors of ray_jobs, and the Serve
deployments. Given a method and a subset it forms the queries (plain or HyDE), picks the indexed texts (contexts
or summaries), retrieves, assembles what the generator reads, and generates and parses answers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from t2rag.config import RunConfig
from t2rag.data import POOLED, Corpus, QuestionSet, build_corpora, build_corpus, load_questions
from t2rag.errors import ConfigError, InputError
from t2rag.generation.base import ChatRequest, Generation, Generator
from t2rag.generation.config import build_generator
from t2rag.methods import Method
from t2rag.pipeline.answering import (
    answer_columns,
    answer_params,
    answer_requests,
    hyde_requests,
    reader_contexts,
    summary_requests,
)
from t2rag.pipeline.steps import StageLog
from t2rag.prompts import Prompts
from t2rag.retrieval import Hits, QueryBlock, Retriever, build_retriever
from t2rag.retrieval.embedder import Embedder
from t2rag.retrieval.vector_store import VectorStore
from t2rag.summaries import load_summaries, save_summaries, summary_key

log = logging.getLogger(__name__)

#: Blocks of question embeddings kept for reuse across methods (one per subset in a batch run).
QUERY_VECTOR_CACHE = 8


def finish_summaries(generations: Sequence[Generation]) -> list[str]:
    """Summary texts from generations; failed ones become empty texts (and are reported)."""
    failed = sum(g.error is not None for g in generations)
    if failed:
        log.warning(
            "%d of %d summaries failed; those contexts are indexed with an empty text", failed, len(generations)
        )
    return [g.text.strip() for g in generations]


class RAGSystem:
    """Everything needed to run any registered method on any loaded subset."""

    def __init__(
        self,
        config: RunConfig,
        questions: QuestionSet | None = None,
        stages: StageLog | None = None,
        generator: Generator | None = None,
    ):
        self.config = config
        self.stages = stages or StageLog()
        self.prompts = Prompts(config.prompts)
        self._questions = questions
        self._generator = generator
        self._retrievers: dict[tuple[str, str], Retriever] = {}
        self._query_vectors: dict[tuple[str, int], np.ndarray] = {}
        self._summaries: dict[str, Corpus] = {}

    # -- data ----------------------------------------------------------------------------------------------
    @cached_property
    def questions(self) -> QuestionSet:
        if self._questions is None:
            d = self.config.data
            with self.stages.stage("load", 0):
                self._questions = load_questions(d.source, d.subsets, d.split)
        return self._questions

    @cached_property
    def corpora(self) -> dict[str, Corpus]:
        return build_corpora(self.questions, self.config.data.pooled_corpus)

    @cached_property
    def pooled_corpus(self) -> Corpus:
        return build_corpus(self.questions, None)

    def corpus(self, subset: str | None) -> Corpus:
        """A subset's corpus; None (or "pooled") means all loaded subsets pooled into one."""
        if subset is None or subset == POOLED:
            return self.pooled_corpus
        try:
            return self.corpora[subset]
        except KeyError:
            raise InputError(f"unknown subset '{subset}' (loaded: {', '.join(self.corpora)})") from None

    # -- generation ----------------------------------------------------------------------------------------
    @property
    def generator(self) -> Generator:
        if self._generator is None:
            self._generator = build_generator(self.generator_config)
        return self._generator

    @property
    def generator_config(self):
        if self.config.generator is None:
            raise ConfigError("this needs a generator: set generator in the config or pass --generator")
        return self.config.generator

    def generate(self, requests: Sequence[ChatRequest], stage: str, chunk: int = 8, **labels: str) -> list[Generation]:
        """Generate in chunks so long runs report progress (and fill the cache) as they go."""
        out: list[Generation] = []
        for start in range(0, len(requests), chunk):
            part = list(requests[start : start + chunk])
            with self.stages.stage(stage, len(part), done=f"{start + len(part)}/{len(requests)}", **labels):
                out.extend(self.generator.generate(part))
        return out

    def summary_corpus(self, corpus: Corpus) -> Corpus:
        """The corpus with every context replaced by its generated summary (generated once, then cached)."""
        if corpus.fingerprint not in self._summaries:
            store = VectorStore(self.config.retrieval.index_uri)
            key = summary_key(corpus, self.generator_config, self.prompts)
            summaries = load_summaries(store, key, corpus)
            if summaries is None:
                requests = summary_requests(self.prompts, list(corpus.texts), self.generator_config)
                summaries = finish_summaries(self.generate(requests, "summarize", corpus=corpus.name))
                save_summaries(store, key, corpus, summaries)
            self._summaries[corpus.fingerprint] = corpus.with_texts(summaries, name=f"{corpus.name}-summaries")
        return self._summaries[corpus.fingerprint]

    # -- retrieval -----------------------------------------------------------------------------------------
    def index_corpus(self, method: Method, subset: str | None) -> Corpus:
        """The texts a method searches: the subset's contexts, or their summaries."""
        corpus = self.corpus(subset)
        return self.summary_corpus(corpus) if method.index_texts == "summary" else corpus

    def retriever(self, method: Method, subset: str | None) -> Retriever:
        """The method's retriever, indexed on its corpus (built once per corpus fingerprint)."""
        if method.retriever is None:
            raise InputError(f"method '{method.name}' does not retrieve")
        corpus = self.index_corpus(method, subset)
        key = (method.retriever, corpus.fingerprint)
        if key not in self._retrievers:
            retriever = build_retriever(method.retriever, self.config.retrieval)
            with self.stages.stage("index", len(corpus), retriever=method.retriever, corpus=corpus.name):
                retriever.index(corpus)
            self._retrievers[key] = retriever
        return self._retrievers[key]

    @cached_property
    def embedder(self) -> Embedder:
        return Embedder(self.config.retrieval.embedder)

    def query_block(self, method: Method, subset: str | None, questions: list[str]) -> QueryBlock:
        """Queries for a block: the questions, with dense vectors when the retriever needs them."""
        block = QueryBlock(questions)
        if not self.retriever(method, subset).needs_query_vectors:
            return block
        if method.query == "hyde":
            requests = hyde_requests(self.prompts, questions, self.generator_config)
            docs = [g.text for g in self.generate(requests, "hyde", method=method.name, subset=subset)]
            with self.stages.stage("embed_queries", len(docs), subset=subset, query="hyde"):
                block.vectors = self.embedder.embed_passages([d or q for d, q in zip(docs, questions, strict=True)])
            return block
        key = (self.config.retrieval.embedder.cache_key, hash(tuple(questions)))
        if key not in self._query_vectors:  # shared by every dense-based method on the same questions
            with self.stages.stage("embed_queries", len(questions), subset=subset):
                vectors = self.embedder.embed_queries(questions)
            while len(self._query_vectors) >= QUERY_VECTOR_CACHE:  # bounded for long-running processes
                self._query_vectors.pop(next(iter(self._query_vectors)))
            self._query_vectors[key] = vectors
        block.vectors = self._query_vectors[key]
        return block

    def retrieve(
        self, method: Method, subset: str | None, questions: list[str], k: int | None = None
    ) -> tuple[Hits, Corpus]:
        """Ranked results for a block of questions, and the corpus their positions refer to.

        k defaults to the run's k; at least max(k, 5) results come back (see `result_depth`).
        """
        retriever = self.retriever(method, subset)
        block = self.query_block(method, subset, questions)
        with self.stages.stage("retrieve", len(questions), method=method.name, subset=str(subset)):
            hits = retriever.search(block, k or self.config.retrieval.k)
        return hits, retriever.corpus

    # -- reading and answering -----------------------------------------------------------------------------
    def contexts(
        self,
        method: Method,
        subset: str | None,
        gold_contexts: Sequence[str],
        ranked_ids: Sequence[Sequence[str]] | None,
        k: int | None = None,
    ) -> list[list[str]]:
        """What the generator reads for each question, as the method prescribes (the top k retrieved texts)."""
        corpus = self.corpus(subset)
        summaries = self.summary_corpus(corpus) if method.reads == "retrieved_summary" else None
        return reader_contexts(method, k or self.config.retrieval.k, gold_contexts, ranked_ids, corpus, summaries)

    def answer(
        self,
        method: Method,
        subset: str | None,
        questions: list[str],
        contexts: list[list[str]],
        references: Sequence[float | None],
    ) -> dict[str, list]:
        """Generate, parse and score answers; returns record columns."""
        requests = self.answer_requests(questions, contexts)
        generations = self.generate(requests, "generate", method=method.name, subset=str(subset))
        return answer_columns(requests, generations, contexts, references)

    def answer_requests(self, questions: list[str], contexts: list[list[str]]) -> list[ChatRequest]:
        """The chat requests that ask for answers (for front ends that run the generator elsewhere)."""
        return answer_requests(self.prompts, answer_params(self.generator_config), questions, contexts)

    def close(self) -> None:
        if self._generator is not None:
            self._generator.close()
            self._generator = None
