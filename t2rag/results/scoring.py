"""Score a predictions file (or a run's per-question records) against the benchmark's references."""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from t2rag.answer import predict_value
from t2rag.data.load import QuestionSet
from t2rag.errors import InputError, first_line
from t2rag.metrics.answers import ANSWER_SCORE_TYPES, answer_scores
from t2rag.metrics.number_match import number_match_one
from t2rag.metrics.retrieval import gold_ranks
from t2rag.run_folder.files import has_records, read_records
from t2rag.run_folder.records import to_records
from t2rag.run_folder.scorecards import DEFAULT_RETRIEVAL_METRICS, ROUTING_TYPES, scorecards_of
from t2rag.storage import filesystem_for, read_objects

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
        if has_records(path):
            return _from_columns(read_records(path).to_pydict(), path)
        try:
            table = pads.dataset(inner, filesystem=fs, format="parquet").to_table()
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{path}: a record file is not readable parquet ({first_line(exc)})") from None
        return _from_columns(table.to_pydict(), path)
    if inner.endswith(".parquet"):
        try:
            table = pq.read_table(inner, filesystem=fs)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{path}: not a readable parquet file ({first_line(exc)})") from None
        return _from_columns(table.to_pydict(), path)
    if inner.endswith((".jsonl", ".json", ".ndjson")):
        with fs.open_input_stream(inner) as stream:
            rows = read_objects(stream.read(), path)
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
    records = None
    if all(k in columns for k in RECORD_COLUMNS):  # with the yardsticks and routing, where the records have them
        carried = (*RECORD_COLUMNS, *ANSWER_SCORE_TYPES, *ROUTING_TYPES)
        records = {k: columns[k] for k in carried if k in columns}
    return Predictions(
        ids=[str(i) for i in ids],
        prediction=columns.get("prediction"),
        context_ids=context_ids,
        method=None if method is None else [str(m) for m in method],
        records=records,
        origin=origin,
    )


@dataclass
class PredictionCounts:
    """What a predictions file held, per method: every row falls in exactly one of answered, unreadable,
    unanswered (an explicit null), unknown (no such question) or excluded (a question left out of scoring);
    missing counts the scorable questions the file has no row for."""

    rows: int = 0
    answered: int = 0
    unreadable: int = 0
    unanswered: int = 0
    unknown: int = 0
    excluded: int = 0
    missing: int = 0
    missing_scored_wrong: bool = True  # False when only the predicted questions were scored


def score_predictions(
    questions: QuestionSet,
    preds: Predictions,
    retrieval_metrics: tuple[str, ...] = DEFAULT_RETRIEVAL_METRICS,
    only_predicted: bool = False,
) -> dict:
    """A scorecard (per subset and weighted) over every scorable question of the data (a question without a
    prediction counts as wrong and as unranked); `only_predicted` scores the predicted questions alone, as does
    a run's records directory (its plan declares what it scored). With a `method` column, one scorecard per method
    under "methods". The counts of `PredictionCounts` come under "predictions"."""
    records, counts = prediction_records(questions, preds, only_predicted or preds.records is not None)
    scorecards = scorecards_of(records, retrieval_metrics)
    if preds.method is None:
        scorecard = scorecards.get(NO_METHOD) or {"subsets": {}, "weighted": {"questions": 0}}
        return {**scorecard, "predictions": asdict(counts[NO_METHOD])}
    return {"methods": scorecards, "predictions": {m: asdict(c) for m, c in counts.items()}}


#: The method name of predictions that name none.
NO_METHOD = ""


def prediction_records(
    questions: QuestionSet, preds: Predictions, only_predicted: bool
) -> tuple[pa.Table, dict[str, PredictionCounts]]:
    """Records for a predictions file, with the counts of what it held.

    What run records already hold is taken as is; a bare prediction is read as a number (or parsed as model
    output) and a ranking is ranked against the gold context. Unless `only_predicted`, every scorable question
    without a row is added as a wrong, unranked answer.
    """
    methods = preds.method or [NO_METHOD] * len(preds.ids)
    dups = [key for key, c in Counter(zip(methods, preds.ids, strict=True)).items() if c > 1]
    if dups:
        raise InputError(f"{preds.origin}: {len(dups)} duplicate ids, e.g. {[i for _, i in dups[:3]]}")
    position = {qid: i for i, qid in enumerate(questions.table.column("id").to_pylist())}
    excluded = questions.table.column("excluded_reason").to_pylist()
    where = np.asarray([position.get(i, -1) for i in preds.ids], dtype=np.int64)
    known = where >= 0
    scorable = known & np.asarray([excluded[i] is None if i >= 0 else False for i in where], dtype=bool)
    method_arr = np.asarray(methods, dtype=object)
    counts: dict[str, PredictionCounts] = {}
    for m in dict.fromkeys(methods):
        mine = method_arr == m
        counts[m] = PredictionCounts(
            rows=int(mine.sum()), unknown=int((mine & ~known).sum()), excluded=int((mine & known & ~scorable).sum())
        )
    for m, c in counts.items():
        if c.unknown:
            log.warning(
                "%s: %d rows of %s name no question of the data and are not scored",
                preds.origin,
                c.unknown,
                m or "the file",
            )
    preds = preds.rows(scorable)
    rows = questions.table.take(pa.array(where[scorable]))
    methods = preds.method or [NO_METHOD] * len(preds.ids)
    columns: dict[str, list] = {
        "id": preds.ids,
        "subset": rows.column("subset").to_pylist(),
        "method": methods,
        "reference": rows.column("answer_value").to_pylist(),
    }
    if preds.records is not None:
        columns.update(preds.records)
    else:
        if preds.prediction is not None:
            contexts = rows.column("context").to_pylist()
            predicted = [predict_value(v, table=c) for v, c in zip(preds.prediction, contexts, strict=True)]
            values = [p.value for p in predicted]
            columns["prediction"] = values
            columns["number_match"] = [
                number_match_one(v, r) for v, r in zip(values, columns["reference"], strict=True)
            ]
            yardsticks = answer_scores(values, [p.formula for p in predicted], columns["reference"],
                                       rows.column("original_answer").to_pylist(),
                                       rows.column("program").to_pylist(), rows.column("question").to_pylist(),
                                       columns["subset"])  # fmt: skip
            columns.update({name: array.to_pylist() for name, array in yardsticks.items()})
        if preds.context_ids is not None:
            ranks = gold_ranks(preds.context_ids, rows.column("context_id").to_pylist())
            columns["context_ids"] = preds.context_ids
            columns["gold_rank"] = [
                None if c is None else int(r) for c, r in zip(preds.context_ids, ranks, strict=True)
            ]
    for m, state in zip(methods, _answer_states(preds, columns), strict=True):
        setattr(counts[m], state, getattr(counts[m], state) + 1)
    records = to_records(pa.table(columns))
    scored_ids = questions.scored().column("id")
    method_of_row = np.asarray(methods, dtype=object)
    for m, c in counts.items():
        have = pa.array([i for i, mine in zip(columns["id"], method_of_row == m, strict=True) if mine], pa.string())
        absent = scored_ids.filter(pc.invert(pc.is_in(scored_ids, have))).to_pylist()
        c.missing, c.missing_scored_wrong = len(absent), not only_predicted
        if absent and not only_predicted:
            records = pa.concat_tables([records, _unanswered(questions, absent, m, preds)])
    return records, counts


def _answer_states(preds: Predictions, columns: dict[str, list]) -> list[str]:
    """answered, unreadable or unanswered for every scorable row."""
    n = len(columns["id"])
    if "prediction" not in columns:  # rankings only: a row with a ranked list answers
        ranked = columns.get("context_ids") or [None] * n
        return ["unanswered" if r is None else "answered" for r in ranked]
    if preds.records is not None:  # a run's records: generated rows have a Number Match verdict
        given = [v is not None for v in columns["number_match"]]
    else:
        given = [v is not None for v in preds.prediction or [None] * n]
    return [
        "unanswered" if not g else "answered" if v is not None and math.isfinite(v) else "unreadable"
        for g, v in zip(given, columns["prediction"], strict=True)
    ]


def _unanswered(questions: QuestionSet, ids: list[str], method: str, preds: Predictions) -> pa.Table:
    """Records of questions a predictions file does not answer: wrong, and ranked without the gold context."""
    rows = questions.take_ids(ids)
    n = len(ids)
    columns: dict[str, object] = {
        "id": ids,
        "subset": rows.column("subset"),
        "method": [method] * n,
        "reference": rows.column("answer_value"),
    }
    if preds.prediction is not None:
        columns["number_match"] = [False] * n
    if preds.context_ids is not None:
        columns["gold_rank"] = pa.array([0] * n, pa.int32())
    return to_records(pa.table(columns))
