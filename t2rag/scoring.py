"""Score a predictions file (or a run's per-question records) against the benchmark's references."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.answer import predict_value
from t2rag.data.load import QuestionSet
from t2rag.errors import InputError
from t2rag.metrics.retrieval import gold_ranks
from t2rag.metrics.summary import DEFAULT_RETRIEVAL_METRICS, summarize
from t2rag.storage import filesystem_for


@dataclass
class Predictions:
    """Columns of a predictions file as Python lists; absent columns are None."""

    ids: list[str]
    prediction: list[object] | None = None
    context_ids: list[list[str] | None] | None = None
    method: list[str] | None = None
    generated: list[bool] | None = None  # from `raw_output` validity in run records
    origin: str = ""

    def rows(self, mask: np.ndarray) -> Predictions:
        pick = np.flatnonzero(mask).tolist()

        def sub(col: list | None) -> list | None:
            return None if col is None else [col[i] for i in pick]

        return Predictions(
            [self.ids[i] for i in pick],
            sub(self.prediction),
            sub(self.context_ids),
            sub(self.method),
            sub(self.generated),
            self.origin,
        )


def read_predictions(path: str) -> Predictions:
    """Read JSONL or parquet predictions; a directory is read as a parquet dataset (a run's `records/`)."""
    fs, inner = filesystem_for(path)
    info = fs.get_file_info(inner)
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{path}: no such file")
    if info.type == pafs.FileType.Directory:
        if fs.get_file_info(inner + "/records").type == pafs.FileType.Directory:
            inner += "/records"
        table = pads.dataset(inner, filesystem=fs, format="parquet").to_table()
        return _from_columns(table.to_pydict(), path)
    if inner.endswith(".parquet"):
        return _from_columns(pq.read_table(inner, filesystem=fs).to_pydict(), path)
    if inner.endswith((".jsonl", ".json", ".ndjson")):
        with fs.open_input_stream(inner) as stream:
            lines = stream.read().decode("utf-8").splitlines()
        rows = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise InputError(f"{path}:{n}: each line must be a JSON object")
            rows.append(row)
        columns = {key: [r.get(key) for r in rows] for key in {k for r in rows for k in r}}
        return _from_columns(columns, path)
    raise InputError(f"{path}: predictions must be .jsonl or .parquet (or a directory of parquet records)")


def _from_columns(columns: dict[str, list], origin: str) -> Predictions:
    if "id" not in columns:
        raise InputError(f"{origin}: predictions need an 'id' column")
    if "prediction" not in columns and "context_ids" not in columns:
        raise InputError(f"{origin}: predictions need a 'prediction' or a 'context_ids' column (or both)")
    ids = columns["id"]
    if any(i is None or str(i) == "" for i in ids):
        raise InputError(f"{origin}: some rows have no id")
    context_ids = columns.get("context_ids")
    if context_ids is not None:
        for n, value in enumerate(context_ids):
            if value is not None and (isinstance(value, str) or not hasattr(value, "__iter__")):
                raise InputError(f"{origin}: row {n + 1}: 'context_ids' must be a list of ids")
        context_ids = [None if v is None else [str(x) for x in v] for v in context_ids]
    generated = None
    if "raw_output" in columns:
        generated = [v is not None for v in columns["raw_output"]]
    method = columns.get("method")
    return Predictions(
        ids=[str(i) for i in ids],
        prediction=columns.get("prediction"),
        context_ids=context_ids,
        method=None if method is None else [str(m) for m in method],
        generated=generated,
        origin=origin,
    )


def score_predictions(
    questions: QuestionSet,
    preds: Predictions,
    retrieval_metrics: tuple[str, ...] = DEFAULT_RETRIEVAL_METRICS,
) -> dict:
    """Summaries per subset and weighted; with a `method` column, one summary per method under "methods"."""
    if preds.method is None:
        return _score_one(questions, preds, retrieval_metrics)
    methods = list(dict.fromkeys(preds.method))
    method_arr = np.asarray(preds.method, dtype=object)
    return {"methods": {m: _score_one(questions, preds.rows(method_arr == m), retrieval_metrics) for m in methods}}


def _score_one(questions: QuestionSet, preds: Predictions, retrieval_metrics: tuple[str, ...]) -> dict:
    dups = [i for i, c in Counter(preds.ids).items() if c > 1]
    if dups:
        raise InputError(f"{preds.origin}: {len(dups)} duplicate ids, e.g. {dups[:3]}")
    try:
        rows = questions.take_ids(preds.ids)
    except Exception as exc:
        raise InputError(f"{preds.origin}: {exc}") from exc
    keep = np.asarray([r is None for r in rows.column("excluded_reason").to_pylist()], dtype=bool)
    skipped = int((~keep).sum())
    rows = rows.filter(pa.array(keep))
    preds = preds.rows(keep)
    subsets = np.asarray(rows.column("subset").to_pylist(), dtype=object)

    kwargs: dict = {"retrieval_metrics": retrieval_metrics}
    if preds.prediction is not None:
        contexts = rows.column("context").to_pylist()
        values = [predict_value(v, table=ctx).value for v, ctx in zip(preds.prediction, contexts, strict=True)]
        kwargs["predictions"] = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        kwargs["references"] = rows.column("answer_value").to_numpy(zero_copy_only=False).astype(np.float64)
        if preds.generated is not None:
            kwargs["generated"] = np.asarray(preds.generated, dtype=bool)
    if preds.context_ids is not None:
        kwargs["ranks"] = gold_ranks(preds.context_ids, rows.column("context_id").to_pylist())
        kwargs["retrieved"] = np.asarray([c is not None for c in preds.context_ids], dtype=bool)
    summary = summarize(subsets, **kwargs)
    if skipped:
        summary["excluded_skipped"] = skipped
    return summary
