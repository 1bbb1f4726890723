"""`t2rag export RUN_DIR --format leaderboard`: a run's records as the T2-RAGBench leaderboard's submission file.

The leaderboard takes one JSON object per line and question:

    {"id": "...", "subset": "FinQA", "context_id": ["ranked", "context", "ids"], "prediction": 12.5}

`context_id` is the method's ranked list (empty for a method that does not retrieve) and `prediction` the number
read from the model's answer (null when none was generated or none could be read). The file is checked against the
run's question set before it is written: every scored question exactly once, with its own subset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.data import QuestionSet, load_questions
from t2rag.errors import InputError
from t2rag.plugins import label
from t2rag.run_folder.files import MANIFEST_FILE, read_manifest, read_records
from t2rag.storage import dump_objects, write_bytes

LEADERBOARD_FIELDS = ("id", "subset", "context_id", "prediction")


@dataclass(frozen=True)
class Export:
    """What an export wrote: where, for which method, and how many lines carry a ranking and a prediction."""

    path: str
    method: str
    questions: int
    with_contexts: int
    with_prediction: int
    #: What made the method: `built-in`, or the plugin and its version as the run's manifest names them.
    origin: str = "built-in"


def run_questions(run_dir: str) -> QuestionSet:
    """The question set a run was evaluated on, read again from the data its manifest names."""
    manifest = read_manifest(run_dir)
    if manifest is None or "config" not in manifest:
        raise InputError(f"{run_dir}: no {MANIFEST_FILE} with the run's config (is this a run directory?)")
    data = manifest["config"].get("data") or {}
    return load_questions(data.get("source"), data.get("subsets"), data.get("split"))


def leaderboard_rows(records: pa.Table, method: str) -> list[dict]:
    """One leaderboard object per record of `method`, in record order."""
    part = records.filter(pc.equal(records.column("method"), method))
    rows = []
    for r in part.select(["id", "subset", "context_ids", "prediction"]).to_pylist():
        prediction = r["prediction"]
        if prediction is not None and not math.isfinite(prediction):
            prediction = None  # JSON has no NaN or infinity
        rows.append(
            {"id": r["id"], "subset": r["subset"], "context_id": r["context_ids"] or [], "prediction": prediction}
        )
    return rows


def validate_leaderboard(rows: list[dict], questions: QuestionSet, partial: bool = False) -> None:
    """Every scored question once with its own subset, nothing else; with `partial`, missing questions are
    allowed (the file then covers only what the run computed)."""
    scored = questions.scored()
    expected = dict(zip(scored.column("id").to_pylist(), scored.column("subset").to_pylist(), strict=True))
    seen: set[str] = set()
    for row in rows:
        if set(row) != set(LEADERBOARD_FIELDS):
            raise InputError(f"leaderboard line for {row.get('id')!r} has fields {sorted(row)}")
        qid = row["id"]
        if qid in seen:
            raise InputError(f"question {qid} appears more than once")
        seen.add(qid)
        if qid not in expected:
            raise InputError(f"question {qid} is not a scored question of {questions.source}")
        if row["subset"] != expected[qid]:
            raise InputError(f"question {qid} is labelled {row['subset']} but belongs to {expected[qid]}")
    missing = [qid for qid in expected if qid not in seen]
    if missing and not partial:
        raise InputError(
            f"{len(missing)} of {len(expected)} scored questions have no record (e.g. {missing[:3]}); "
            "finish the run, or pass --partial to export only what it computed"
        )


def choose_method(records: pa.Table, method: str | None) -> str:
    """The method to export: the one named, or the run's only method."""
    methods = list(dict.fromkeys(records.column("method").to_pylist()))
    if method is not None:
        if method not in methods:
            raise InputError(f"method '{method}' has no records in this run (it has: {', '.join(methods)})")
        return method
    if len(methods) != 1:
        raise InputError(f"the run has several methods ({', '.join(methods)}); choose one with --method")
    return methods[0]


def export_leaderboard(run_dir: str, out: str, method: str | None = None, partial: bool = False) -> Export:
    """Write the leaderboard file of one method of a run, validated against the run's question set."""
    records = read_records(run_dir, ["id", "subset", "method", "context_ids", "prediction"])
    if records.num_rows == 0:
        raise InputError(f"{run_dir}: no records found under {run_dir}/records")
    method = choose_method(records, method)
    rows = leaderboard_rows(records, method)
    validate_leaderboard(rows, run_questions(run_dir), partial)
    path = write_bytes(out, dump_objects(rows))
    made_by = (((read_manifest(run_dir) or {}).get("plugins") or {}).get("methods") or {}).get(method)
    return Export(
        path=path,
        method=method,
        questions=len(rows),
        with_contexts=sum(bool(r["context_id"]) for r in rows),
        with_prediction=sum(r["prediction"] is not None for r in rows),
        origin=label(made_by["source"], made_by["version"]) if made_by else "built-in",
    )
