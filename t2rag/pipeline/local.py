"""The single-process evaluation: every stage in this process, one (method, subset) block at a time."""

from __future__ import annotations

import logging
import shutil
import time

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.data import QuestionSet
from t2rag.errors import ConfigError
from t2rag.methods import Method, get_method
from t2rag.pipeline.manifest import build_manifest, read_json, write_json
from t2rag.pipeline.records import part_path, read_records, to_table, write_records
from t2rag.pipeline.steps import StageLog, retrieval_columns, sample_questions
from t2rag.scoring import Predictions, score_predictions
from t2rag.storage import filesystem_for, is_s3
from t2rag.system import RAGSystem

log = logging.getLogger(__name__)


def check_methods(config: RunConfig, methods: list[Method]) -> None:
    """Refuse runs that would need a generator but have none."""
    if config.generator is not None:
        return
    if any(config.generates(m.name) for m in methods):
        raise ConfigError("generating answers needs a generator: pass --generator NAME or use --retrieval-only")
    for m in methods:
        if m.retrieval_needs_generator:
            raise ConfigError(f"method '{m.name}' needs a generator even for retrieval: pass --generator NAME")


def prepare_out(config: RunConfig, overwrite: bool) -> None:
    """Allow resuming a run of the same config; refuse (or, with overwrite, clear) results of another config."""
    previous = read_json(config.out, "manifest.json")
    if previous is not None and previous.get("fingerprint") != config.fingerprint():
        if not overwrite:
            raise ConfigError(
                f"{config.out} holds results of a different configuration; choose another --out or pass --overwrite"
            )
        if is_s3(config.out):
            fs, path = filesystem_for(config.out)
            fs.delete_dir_contents(path, missing_dir_ok=True)
        else:
            shutil.rmtree(config.out, ignore_errors=True)
    # Claim the folder before any record is written, so a killed run can only be resumed by the same config.
    write_json(config.out, "manifest.json", {"fingerprint": config.fingerprint(), "config": config.model_dump()})


class LocalEvaluation:
    """Runs a RunConfig in this process and writes records, summary and manifest under `config.out`."""

    def __init__(self, config: RunConfig, system: RAGSystem | None = None):
        self.config = config
        self.stages = StageLog()
        self.system = system or RAGSystem(config, stages=self.stages)
        self.system.stages = self.stages

    def run(self, overwrite: bool = False) -> dict:
        cfg = self.config
        started = time.time()
        prepare_out(cfg, overwrite)
        methods = [get_method(m) for m in cfg.methods]
        check_methods(cfg, methods)
        questions = self.system.questions
        scored = questions.scored()
        try:
            for method in methods:
                if cfg.retrieval_only and not method.retrieves:
                    continue
                for subset in questions.subsets:
                    if self._done(method.name, subset):
                        log.info("resume: %s/%s already has records", method.name, subset)
                        continue
                    rows = scored.filter(pc.equal(scored.column("subset"), subset))
                    write_records(cfg.out, method.name, subset, self.run_cell(method, subset, rows))
        finally:
            self.system.close()
        return finish_run(cfg, questions, self.stages, started)

    def _done(self, method: str, subset: str) -> bool:
        fs, path = filesystem_for(part_path(self.config.out, method, subset))
        return fs.get_file_info(path).type.name == "File"

    def run_cell(self, method: Method, subset: str, rows: pa.Table) -> pa.Table:
        """Records of one method on one subset: retrieval for all its questions, generation for the sample."""
        cfg = self.config
        sample = sample_questions(rows, cfg.limit, cfg.seed)
        # HyDE generates its queries, so it retrieves only for the sampled questions; others retrieve for all.
        base = sample if (not method.retrieves or method.query == "hyde") else rows
        columns: dict[str, list] = {
            "id": base.column("id").to_pylist(),
            "subset": [subset] * base.num_rows,
            "method": [method.name] * base.num_rows,
            "reference": base.column("answer_value").to_pylist(),
        }
        if method.retrieves:
            hits, corpus = self.system.retrieve(method, subset, base.column("question").to_pylist())
            columns.update(retrieval_columns(hits, corpus, base.column("context_id").to_pylist()))
        if cfg.generates(method.name):
            position = {qid: i for i, qid in enumerate(columns["id"])}
            picked = [position[qid] for qid in sample.column("id").to_pylist()]
            ranked = [columns["context_ids"][i] for i in picked] if method.retrieves else None
            contexts = self.system.contexts(method, subset, sample.column("context").to_pylist(), ranked)
            answers = self.system.answer(
                method,
                subset,
                sample.column("question").to_pylist(),
                contexts,
                sample.column("answer_value").to_pylist(),
            )
            for name, values in answers.items():
                full = columns.setdefault(name, [None] * base.num_rows)
                for i, value in zip(picked, values, strict=True):
                    full[i] = value
        return to_table(columns)


def finish_run(config: RunConfig, questions: QuestionSet, stages: StageLog, started: float) -> dict:
    """Score the run's records, write summary.json and manifest.json, and return the summary."""
    records = read_records(config.out)
    records = records.filter(pc.is_in(records.column("method"), pa.array(config.methods)))
    with stages.stage("score", records.num_rows):
        summary = score_records(questions, records, config.out)
    scored = summary.get("methods", {})
    result = {"methods": {m: scored[m] for m in config.methods if m in scored}, "out": config.out}
    tokens = {
        "prompt": int(pc.sum(records.column("prompt_tokens")).as_py() or 0),
        "completion": int(pc.sum(records.column("completion_tokens")).as_py() or 0),
    }
    write_json(config.out, "summary.json", result)
    manifest = build_manifest(
        config.model_dump(), config.fingerprint(), stages.entries, stages.totals(), tokens, started
    )
    write_json(config.out, "manifest.json", manifest)
    return result


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
