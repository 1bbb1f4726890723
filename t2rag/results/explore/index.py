"""What the explorer holds in memory for a run, and what it reads on demand.

At start: the light record columns of every record (method, question, outcome, gold rank, prediction) with the
record file and row each came from, the questions' text, references and gold context ids, and the report's tables.
On demand: one question's heavy columns (reasoning, raw output, ranked contexts with scores), read from the record
files that hold its rows only, and a context's text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.data import load_questions
from t2rag.estimate.plan_vs_run import plan_table
from t2rag.judge.run import read_verdicts
from t2rag.results.findings import attributed, differences, gap_table, headline_rows, number_match_plot, outcome_table
from t2rag.results.plots import plot_rank_curves
from t2rag.results.report import ordered_methods, rank_curves
from t2rag.run_folder.files import LocatedRecords, read_located, read_manifest, read_result
from t2rag.run_folder.outcomes import OUTCOMES
from t2rag.run_folder.scorecards import DEFAULT_RETRIEVAL_METRICS, scorecards_of

LIGHT = ["id", "subset", "method", "gold_rank", "number_match", "reference", "prediction", "formula", "formula_ok",
         "outcome"]  # fmt: skip
HEAVY = ["context_ids", "scores", "raw_output", "formula", "prediction_source", "prediction", "generation_error",
         "gold_rank", "number_match", "em", "f1", "em_error", "exe_acc", "corpus", "routed_subsets",
         "routing_acc"]  # fmt: skip
SHOWN_CONTEXTS = 10


@dataclass
class RunIndex:
    """A run's records and questions, indexed for the explorer (`load_run`). Records are numbered as in `records`,
    questions as in `questions` (the data's order)."""

    run_dir: str
    records: pa.Table  # LIGHT columns plus `depth`, `file` and `row`
    located: LocatedRecords
    questions: pa.Table  # id, subset, question, original_answer, answer_value, context_id
    contexts: dict[str, int]  # context_id -> a question row holding it
    context_texts: pa.ChunkedArray
    methods: list[str]
    overview: dict = field(default_factory=dict)
    plots: dict[str, bytes] = field(default_factory=dict)
    #: (method, subset, id) -> the judge's verdicts of that answer against the baseline's (`t2rag judge`)
    verdicts: dict[tuple[str, str, str], list[dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        keys = zip(self.questions.column("subset").to_pylist(), self.questions.column("id").to_pylist(), strict=True)
        self.question_of_key = {key: n for n, key in enumerate(keys)}
        self.lowered = [q.lower() for q in self.questions.column("question").to_pylist()]
        column = self.records.column
        self.method = column("method").to_numpy(zero_copy_only=False)
        self.subset = column("subset").to_numpy(zero_copy_only=False)
        self.outcome = column("outcome").fill_null("").to_numpy(zero_copy_only=False)
        rec_keys = zip(self.subset.tolist(), column("id").to_pylist(), strict=True)
        self.question = np.asarray([self.question_of_key.get(k, -1) for k in rec_keys], dtype=np.int64)
        order = np.argsort(self.question, kind="stable")
        bounds = np.searchsorted(self.question[order], np.arange(len(self.lowered) + 1))
        self.records_of = [order[bounds[n] : bounds[n + 1]] for n in range(len(self.lowered))]

    # -- the question browser ------------------------------------------------------------------------------------
    def question_list(
        self, method: str | None, subset: str | None, outcome: str | None, text: str | None, offset: int, limit: int
    ) -> dict:
        """Questions that match every filter given (in the data's order), with each method's outcome; `total`
        counts all matches."""
        mask = self.question >= 0
        for values, wanted in ((self.method, method), (self.subset, subset), (self.outcome, outcome)):
            if wanted:
                mask &= values == wanted
        found = np.unique(self.question[mask])
        if text:
            needle = text.lower()
            found = found[np.fromiter((needle in self.lowered[n] for n in found), bool, len(found))]
        rows = []
        for n in found[offset : offset + limit].tolist():
            q = self.questions.slice(n, 1).to_pylist()[0]
            rows.append(
                {"subset": q["subset"], "id": q["id"], "question": q["question"], "outcomes": self._outcomes(n)}
            )
        return {"total": len(found), "offset": offset, "rows": rows}

    def _outcomes(self, n: int) -> dict[str, str | None]:
        found = {self.method[i]: self.outcome[i] or None for i in self.records_of[n]}
        return {m: found[m] for m in self.methods if m in found}

    # -- one question --------------------------------------------------------------------------------------------
    def question_detail(self, subset: str, qid: str) -> dict:
        n = self.question_of_key.get((subset, qid))
        if n is None:
            raise KeyError(f"no question {subset}/{qid} in this run's data")
        q = self.questions.slice(n, 1).to_pylist()[0]
        gold = q["context_id"]
        answers = []
        rank = {m: r for r, m in enumerate(self.methods)}
        mine = sorted(self.records_of[n].tolist(), key=lambda i: rank[self.method[i]])
        file_of, row_of = self.records.column("file"), self.records.column("row")
        tables = {f: self.located.read_file(f, HEAVY) for f in {file_of[i].as_py() for i in mine}}
        for i in mine:
            heavy = tables[file_of[i].as_py()].slice(row_of[i].as_py(), 1).to_pylist()[0]
            ids, scores = heavy["context_ids"], heavy["scores"]
            ranked = None
            if ids is not None:
                ranked = [{"context_id": c, "score": _finite(s), "gold": c == gold}
                          for c, s in zip(ids[:SHOWN_CONTEXTS], (scores or [None] * len(ids))[:SHOWN_CONTEXTS],
                                          strict=False)]  # fmt: skip
            steps = _reasoning(heavy["raw_output"])
            answers.append({
                "method": self.method[i],
                "outcome": self.outcome[i] or None,
                "number_match": heavy["number_match"],
                "em": None if heavy["em"] is None else heavy["em"] == 1,
                "f1": _finite(heavy["f1"]),
                "em_error": heavy["em_error"],
                "exe_acc": heavy["exe_acc"],
                "corpus": heavy["corpus"],
                "routed_subsets": heavy["routed_subsets"],
                "routing_acc": heavy["routing_acc"],
                "verdicts": self.verdicts.get((self.method[i], subset, qid), []),
                "prediction": _finite(heavy["prediction"]),
                "prediction_source": heavy["prediction_source"],
                "formula": heavy["formula"],
                "reasoning_steps": steps,
                "raw_output": heavy["raw_output"],
                "generation_error": heavy["generation_error"],
                "gold_rank": heavy["gold_rank"],
                "contexts": ranked,
            })  # fmt: skip
        return {
            "subset": subset,
            "id": qid,
            "question": q["question"],
            "reference": q["original_answer"],
            "reference_value": _finite(q["answer_value"]),
            "gold_context_id": gold,
            "gold_context": self.context_text(gold) if gold else None,
            "answers": answers,
        }

    def context_text(self, context_id: str) -> str | None:
        row = self.contexts.get(context_id)
        return None if row is None else self.context_texts[row].as_py()


def _finite(value: object) -> object:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _reasoning(raw: str | None) -> list[str]:
    if not raw:
        return []
    from t2rag.answer import predict

    return list(predict(raw).reasoning_steps)


def load_run(run_dir: str, data: str | None = None) -> RunIndex:
    """Index a run (local or `s3://`) for the explorer; `data` overrides where its questions are read from."""
    located = read_located(run_dir, [*LIGHT, "context_ids"])  # the light columns only (older files lack `outcome`)
    depth = pc.list_value_length(located.table.column("context_ids"))
    records = located.table.append_column("depth", depth).select([*LIGHT, "depth", "file", "row"])
    manifest = read_manifest(run_dir)
    records = attributed(records, manifest)
    chosen = ((manifest or {}).get("config") or {}).get("data") or {}
    qs = load_questions(data or chosen.get("source"), chosen.get("subsets"), chosen.get("split"))
    questions = qs.table.select(["id", "subset", "question", "original_answer", "answer_value", "context_id"])
    context_ids = qs.table.column("context_id").to_pylist()
    index = RunIndex(
        run_dir=run_dir,
        records=records,
        located=located,
        questions=questions,
        contexts={c: i for i, c in reversed(list(enumerate(context_ids)))},
        context_texts=qs.table.column("context"),
        methods=ordered_methods(list(dict.fromkeys(records.column("method").to_pylist()))),
    )
    index.overview, index.plots = _overview(records, index.methods, manifest)
    for v in read_verdicts(run_dir).to_pylist():
        index.verdicts.setdefault((v["method"], v["subset"], v["id"]), []).append(
            {k: v[k] for k in ("judge", "baseline", "order", "winner", "reasoning")}
        )
    plan_header, plan_rows = plan_table((read_result(run_dir) or {}).get("plan_vs_run"))
    index.overview["plan"] = {"header": plan_header, "rows": plan_rows}
    return index


def _overview(records: pa.Table, methods: list[str], manifest: dict | None) -> tuple[dict, dict[str, bytes]]:
    """The report's tables as JSON (headline metrics, outcomes, the gap to the oracle, differences that hold),
    and its plots."""
    scorecards = scorecards_of(records, DEFAULT_RETRIEVAL_METRICS)
    headline = headline_rows({m: scorecards[m] for m in methods})
    found, held = differences(records, methods)
    outcome_header, outcome_rows = outcome_table(records, methods)
    gap_header, gap_rows = gap_table(records, methods)
    overview = {
        "methods": methods,
        "subsets": sorted(set(records.column("subset").to_pylist())),
        "records": records.num_rows,
        "outcome_names": list(OUTCOMES),
        "headline": [{k: _finite(v) for k, v in row.items()} for row in headline],
        "outcomes": {"header": outcome_header, "rows": outcome_rows},
        "gap": {"header": gap_header, "rows": gap_rows},
        "differences": [d.as_dict() | {"holds": ok} for d, ok in zip(found, held, strict=True)],
        "setting": (manifest or {}).get("data"),
    }
    plots = {}
    number_match = number_match_plot({m: scorecards[m] for m in methods})
    if number_match is not None:
        plots["number_match"] = number_match
    ks, curves = rank_curves(records)
    if curves:
        plots["retrieval_curves"] = plot_rank_curves(curves, ks)
    return overview, plots
