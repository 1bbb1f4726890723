"""Score a predictions file (or a run's per-question records) against the benchmark's references."""

from __future__ import annotations

import json
import logging
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
from t2rag.metrics.number_match import number_match_one
from t2rag.metrics.retrieval import gold_ranks
from t2rag.metrics.summary import DEFAULT_RETRIEVAL_METRICS
from t2rag.pipeline.records import summarize_records, to_records
from t2rag.storage import filesystem_for

log = logging.getLogger(__name__)


@dataclass
class Predictions:
    """Columns of a predictions file as Python lists; absent columns are None."""

    ids: list[str]
    prediction: list[object] | None = None
    context_ids: list[list[str] | None] | None = None
    method: list[str] | None = None
    records: dict[str, list] | None = None  # a run's scored columns (RECORD_COLUMNS), taken as they are
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
            None if self.records is None else {k: sub(v) for k, v in self.records.items()},
            self.origin,
        )


#: Columns that make a predictions file a run's records: scored already, so they are not parsed or ranked again.
RECORD_COLUMNS = ("method", "context_ids", "gold_rank", "prediction", "number_match")


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
    method = columns.get("method")
    records = {k: columns[k] for k in RECORD_COLUMNS} if all(k in columns for k in RECORD_COLUMNS) else None
    return Predictions(
        ids=[str(i) for i in ids],
        prediction=columns.get("prediction"),
        context_ids=context_ids,
        method=None if method is None else [str(m) for m in method],
        records=records,
        origin=origin,
    )


def score_predictions(
    questions: QuestionSet,
    preds: Predictions,
    retrieval_metrics: tuple[str, ...] = DEFAULT_RETRIEVAL_METRICS,
) -> dict:
    """Summaries per subset and weighted; with a `method` column, one summary per method under "methods"."""
    summaries = summarize_records(prediction_records(questions, preds), retrieval_metrics)
    if preds.method is None:
        return summaries.get(NO_METHOD) or {"subsets": {}, "weighted": {"questions": 0}}
    return {"methods": summaries}


#: The method name of predictions that name none.
NO_METHOD = ""


def prediction_records(questions: QuestionSet, preds: Predictions) -> pa.Table:
    """Records for a predictions file: what run records already hold is taken as is; a bare prediction is
    read as a number (or parsed as model output) and a ranking is ranked against the gold context."""
    methods = preds.method or [NO_METHOD] * len(preds.ids)
    dups = [key for key, c in Counter(zip(methods, preds.ids, strict=True)).items() if c > 1]
    if dups:
        raise InputError(f"{preds.origin}: {len(dups)} duplicate ids, e.g. {[i for _, i in dups[:3]]}")
    try:
        rows = questions.take_ids(preds.ids)
    except Exception as exc:
        raise InputError(f"{preds.origin}: {exc}") from exc
    keep = np.asarray([r is None for r in rows.column("excluded_reason").to_pylist()], dtype=bool)
    if not keep.all():
        log.warning("%s: %d predictions are for excluded questions and are not scored", preds.origin, (~keep).sum())
    rows, preds = rows.filter(pa.array(keep)), preds.rows(keep)
    methods = preds.method or [NO_METHOD] * len(preds.ids)
    columns: dict[str, object] = {
        "id": preds.ids,
        "subset": rows.column("subset"),
        "method": methods,
        "reference": rows.column("answer_value"),
    }
    if preds.records is not None:
        columns.update(preds.records)
    else:
        if preds.prediction is not None:
            contexts = rows.column("context").to_pylist()
            values = [predict_value(v, table=c).value for v, c in zip(preds.prediction, contexts, strict=True)]
            references = rows.column("answer_value").to_pylist()
            columns["prediction"] = values
            columns["number_match"] = [number_match_one(v, r) for v, r in zip(values, references, strict=True)]
        if preds.context_ids is not None:
            ranks = gold_ranks(preds.context_ids, rows.column("context_id").to_pylist())
            columns["context_ids"] = preds.context_ids
            columns["gold_rank"] = [
                None if c is None else int(r) for c, r in zip(preds.context_ids, ranks, strict=True)
            ]
    return to_records(pa.table({k: columns[k] for k in columns}))
