"""The single-process evaluation: every stage in this process, blocks of questions at a time."""

from __future__ import annotations

import logging
import shutil
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.data import Corpus, QuestionSet, build_corpora, load_questions
from t2rag.errors import ConfigError
from t2rag.methods import Method, get_method
from t2rag.pipeline.manifest import build_manifest, read_json, write_json
from t2rag.pipeline.records import part_path, read_records, to_table, write_records
from t2rag.pipeline.steps import StageLog, retrieval_columns
from t2rag.retrieval import QueryBlock, Retriever, build_retriever
from t2rag.retrieval.dense import DenseRetriever
from t2rag.scoring import Predictions, score_predictions
from t2rag.storage import filesystem_for, is_s3

log = logging.getLogger(__name__)


class LocalEvaluation:
    """Runs a RunConfig in this process and writes records, summary and manifest under `config.out`."""

    def __init__(self, config: RunConfig):
        self.config = config
        self.stages = StageLog()
        self._retrievers: dict[tuple[str, str], Retriever] = {}
        self._query_vectors: dict[tuple[str, str, str], np.ndarray] = {}

    # -- orchestration -------------------------------------------------------------------------------------
    def run(self, overwrite: bool = False) -> dict:
        cfg = self.config
        started = time.time()
        self._prepare_out(overwrite)
        with self.stages.stage("load", 0):
            questions = load_questions(cfg.data.source, cfg.data.subsets, cfg.data.split)
            corpora = build_corpora(questions, cfg.data.pooled_corpus)
        methods = [get_method(m) for m in cfg.methods]
        self._check_methods(methods)
        scored = questions.scored()
        for method in methods:
            if cfg.retrieval_only and not method.retrieves:
                continue
            for subset in questions.subsets:
                if self._done(method.name, subset):
                    log.info("resume: %s/%s already has records", method.name, subset)
                    continue
                rows = scored.filter(pc.equal(scored.column("subset"), subset))
                table = self.run_cell(method, subset, rows, corpora[subset])
                write_records(cfg.out, method.name, subset, table)
        return self.finish(questions, started)

    def finish(self, questions: QuestionSet, started: float) -> dict:
        cfg = self.config
        records = read_records(cfg.out)
        records = records.filter(pc.is_in(records.column("method"), pa.array(cfg.methods)))
        with self.stages.stage("score", records.num_rows):
            summary = score_records(questions, records, cfg.out)
        tokens = {
            "prompt": int(pc.sum(records.column("prompt_tokens")).as_py() or 0),
            "completion": int(pc.sum(records.column("completion_tokens")).as_py() or 0),
        }
        scored = summary.get("methods", {})
        result = {"methods": {m: scored[m] for m in cfg.methods if m in scored}, "out": cfg.out}
        write_json(cfg.out, "summary.json", result)
        manifest = build_manifest(
            cfg.model_dump(), cfg.fingerprint(), self.stages.entries, self.stages.totals(), tokens, started
        )
        write_json(cfg.out, "manifest.json", manifest)
        return result

    def _check_methods(self, methods: list[Method]) -> None:
        for m in methods:
            if m.retrieval_needs_generator:
                raise ConfigError(f"method '{m.name}' needs a generator (set generator in the config)")

    def _prepare_out(self, overwrite: bool) -> None:
        cfg = self.config
        previous = read_json(cfg.out, "manifest.json")
        if previous is None or previous.get("fingerprint") == cfg.fingerprint():
            return
        if not overwrite:
            raise ConfigError(
                f"{cfg.out} holds results of a different configuration; choose another --out or pass --overwrite"
            )
        if is_s3(cfg.out):
            fs, path = filesystem_for(cfg.out)
            fs.delete_dir_contents(path, missing_dir_ok=True)
        else:
            shutil.rmtree(cfg.out, ignore_errors=True)

    def _done(self, method: str, subset: str) -> bool:
        fs, path = filesystem_for(part_path(self.config.out, method, subset))
        return fs.get_file_info(path).type.name == "File"

    # -- one (method, subset) cell -----------------------------------------------------------------------
    def run_cell(self, method: Method, subset: str, rows: pa.Table, corpus: Corpus) -> pa.Table:
        columns: dict[str, list] = {
            "id": rows.column("id").to_pylist(),
            "subset": [subset] * rows.num_rows,
            "method": [method.name] * rows.num_rows,
            "reference": rows.column("answer_value").to_pylist(),
        }
        if method.retrieves:
            columns.update(self.retrieve(method, subset, rows, corpus))
        return to_table(columns)

    def retrieve(self, method: Method, subset: str, rows: pa.Table, corpus: Corpus) -> dict[str, list]:
        retriever = self._retriever(method.retriever, corpus)
        questions = rows.column("question").to_pylist()
        block = QueryBlock(questions)
        if retriever.needs_query_vectors:
            block.vectors = self.query_vectors(subset, rows, questions)
        with self.stages.stage("retrieve", len(questions), method=method.name, subset=subset):
            hits = retriever.search(block, self.config.retrieval.k)
        return retrieval_columns(hits, corpus, rows.column("context_id").to_pylist())

    def _retriever(self, name: str, corpus: Corpus) -> Retriever:
        key = (name, corpus.fingerprint)
        if key not in self._retrievers:
            retriever = build_retriever(name, self.config.retrieval)
            with self.stages.stage("index", len(corpus), retriever=name, corpus=corpus.name):
                retriever.index(corpus)
            self._retrievers[key] = retriever
        return self._retrievers[key]

    def query_vectors(self, subset: str, rows: pa.Table, texts: list[str]) -> np.ndarray:
        """Question embeddings, computed once per subset and shared by every dense-based method."""
        key = (subset, self.config.retrieval.embedder.cache_key, str(hash(tuple(texts))))
        if key not in self._query_vectors:
            dense = DenseRetriever(self.config.retrieval.embedder, self.config.retrieval.index_uri)
            with self.stages.stage("embed_queries", len(texts), subset=subset):
                self._query_vectors[key] = dense.embedder.embed_queries(texts)
        return self._query_vectors[key]


def score_records(questions: QuestionSet, records: pa.Table, origin: str) -> dict:
    """Summaries per method, computed by the same code as `t2rag score`."""
    cols = records.to_pydict()
    preds = Predictions(
        ids=cols["id"],
        prediction=cols["prediction"],
        context_ids=cols["context_ids"],
        method=cols["method"],
        generated=[r is not None for r in cols["raw_output"]],
        origin=origin,
    )
    return score_predictions(questions, preds)


def run_local(config: RunConfig, overwrite: bool = False) -> dict:
    return LocalEvaluation(config).run(overwrite=overwrite)
