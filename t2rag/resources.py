"""What the stages of one process share, loaded lazily and once: data, corpora, indexes, models and the generator.

A Resources object makes no decision about any method: it hands a stage the corpus, retriever or model the
stage asks for. The single-process runner holds one; every Ray actor and Serve replica holds its own.
"""

from __future__ import annotations

from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.data import POOLED, Corpus, QuestionSet, build_corpora, build_corpus, load_questions
from t2rag.data.distractors import extend, load_distractors
from t2rag.errors import ConfigError, InputError
from t2rag.generation.base import Generator
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.registry import build_generator
from t2rag.methods import Method
from t2rag.progress import StageLog
from t2rag.prompts import Prompts
from t2rag.retrieval import Retriever, build_retriever
from t2rag.retrieval.dense.embed_tokenizer import EmbedTokenizer
from t2rag.retrieval.dense.embedder import Embedder, make_embedder
from t2rag.retrieval.dense.hashing_embedder import HashingEmbedder
from t2rag.retrieval.dense.vector_store import VectorStore
from t2rag.summaries import GenerateRows, in_chunks, summarized


class Resources:
    """The loaded state of one run config in one process."""

    def __init__(
        self,
        config: RunConfig,
        questions: QuestionSet | None = None,
        log: StageLog | None = None,
        generator: Generator | None = None,
    ):
        self.config = config
        self.log = log or StageLog()
        self.prompts = Prompts(config.prompts)
        self._questions = questions
        self._generator = generator
        self._retrievers: dict[tuple[str, str], Retriever] = {}
        self._summaries: dict[str, Corpus] = {}
        self._unions: dict[str, Corpus] = {}

    # -- data ----------------------------------------------------------------------------------------------
    @property
    def questions(self) -> QuestionSet:
        if self._questions is None:
            d = self.config.data
            with self.log.stage("load", 0, source=d.source or "sample") as labels:
                self._questions = load_questions(d.source, d.subsets, d.split)
                labels["rows"] = len(self._questions)
        return self._questions

    @cached_property
    def corpora(self) -> dict[str, Corpus]:
        corpora = build_corpora(self.questions, self.config.data.pooled_corpus)
        return {name: self._with_distractors(c) for name, c in corpora.items()}

    @cached_property
    def pooled_corpus(self) -> Corpus:
        return self._with_distractors(build_corpus(self.questions, None))

    def _union(self, name: str) -> Corpus:
        if name not in self._unions:
            subsets = name.split("+")
            unknown = [s for s in subsets if s not in self.questions.subsets]
            if unknown:
                raise InputError(f"unknown corpus '{name}': {', '.join(unknown)} not loaded")
            table = self.questions.table
            part = QuestionSet(table.filter(pc.is_in(table.column("subset"), pa.array(subsets))),
                               self.questions.source, self.questions.files)  # fmt: skip
            self._unions[name] = self._with_distractors(build_corpus(part, None))
        return self._unions[name]

    def _with_distractors(self, corpus: Corpus) -> Corpus:
        return extend(corpus, self.distractors) if self.config.data.distractors else corpus

    @cached_property
    def distractors(self) -> Corpus:
        return load_distractors(self.config.data.distractors)

    def corpus(self, name: str | None) -> Corpus:
        """A corpus by name: a subset's, several subsets' pooled ("FinQA+TAT-DQA": what a router's top subsets
        are), or "pooled" (or None) for all loaded subsets pooled into one."""
        if name is None or name == POOLED:
            return self.pooled_corpus
        if "+" in name:
            return self._union(name)
        try:
            return self.corpora[name]
        except KeyError:
            raise InputError(f"unknown corpus '{name}' (loaded: {', '.join(self.corpora)}, {POOLED})") from None

    def data_description(self) -> dict:
        """What a run is evaluated on: the source, and per subset its splits, scored questions and the contexts
        its questions are searched against (the pooled corpus' size when subsets share one)."""
        questions = self.questions
        scored = questions.scored()
        subsets: dict[str, dict] = {}
        for name in questions.subsets:
            part = scored.filter(pc.equal(scored.column("subset"), name))
            corpus = self.pooled_corpus if self.config.data.pooled_corpus else self.corpora[name]
            subsets[name] = {
                "splits": sorted({s for s in part.column("split").to_pylist() if s}),
                "questions": part.num_rows,
                "contexts": len(corpus),
            }
        return {
            "source": questions.source,
            "pooled_corpus": self.config.data.pooled_corpus,
            "distractors": self.config.data.distractors,
            "subsets": subsets,
        }

    def context_summary_corpus(self, corpus: Corpus, generate: GenerateRows | None = None) -> Corpus:
        """The corpus with every context replaced by its generated summary; the ones not stored yet are generated
        by `generate` (a Ray job passes its generator service), by default in this process."""
        if corpus.fingerprint not in self._summaries:
            reuse = self.generator_config.prefix_reuse
            generate = generate or in_chunks(self.generator, self.log, corpus.name, reuse)
            store = VectorStore(self.config.retrieval.index_uri)
            self._summaries[corpus.fingerprint] = summarized(
                corpus, self.generator_config, self.prompts, store, generate
            )
        return self._summaries[corpus.fingerprint]

    def index_corpus(self, method: Method, corpus_name: str | None) -> Corpus:
        """The texts a method searches in the named corpus (see `corpus`): its contexts, or their summaries."""
        corpus = self.corpus(corpus_name)
        return self.context_summary_corpus(corpus) if method.index_texts == "summary" else corpus

    # -- models and indexes --------------------------------------------------------------------------------
    @property
    def generator_config(self) -> GeneratorConfig:
        if self.config.generator is None:
            raise ConfigError("this needs a generator: set generator in the config or pass --generator")
        return self.config.generator

    @property
    def generator(self) -> Generator:
        if self._generator is None:
            self._generator = build_generator(self.generator_config)
        return self._generator

    @cached_property
    def embedder(self) -> Embedder | HashingEmbedder:
        return make_embedder(self.config.retrieval.embedder)

    @cached_property
    def embed_tokenizer(self) -> EmbedTokenizer:
        return EmbedTokenizer(self.config.retrieval.embedder)

    def retriever(self, method: Method, corpus_name: str | None) -> Retriever:
        """The method's retriever, indexed on the named corpus, or on its shard `retrieval.shard` (built once per
        retriever and corpus)."""
        if method.retriever is None:
            raise InputError(f"method '{method.name}' does not retrieve")
        corpus = self.index_corpus(method, corpus_name)
        key = (method.retriever, corpus.fingerprint)
        if key not in self._retrievers:
            r = self.config.retrieval
            retriever = build_retriever(method.retriever, r, self.config.settings)
            with self.log.stage("index", len(corpus), retriever=method.retriever, corpus=corpus.name) as labels:
                shard = r.held_shard(len(corpus))
                if shard is None:
                    retriever.index(corpus)
                else:  # one shard's actor (Ray): hits come back with shard-local positions
                    retriever.index_shard(corpus, shard)
                labels.update(getattr(retriever, "index_info", {}))
            self._retrievers[key] = retriever
        return self._retrievers[key]

    def close(self) -> None:
        if self._generator is not None:
            self._generator.close()
            self._generator = None
