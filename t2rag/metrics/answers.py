"""The answer yardsticks of T2-RAGBench's family, per record, beside Number Match: TAT-QA's EM and F1 with the error
kind of an EM miss (t2rag.metrics.tatqa) and FinQA's execution and program accuracy (t2rag.metrics.finqa). One
function for every place answers are scored (the parse stage, `t2rag score` of a predictions file)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from t2rag.metrics.finqa import execution_match, program_match
from t2rag.metrics.percent_rule import SCALE_DROPPED, percent_reading
from t2rag.metrics.tatqa import tatqa_score

#: The record columns these yardsticks fill: `em` (0 or 1) and `f1` (0..1) against the question's
#: `original_answer` (null where the source has none), `em_error` (scale, sign or scale_sign: an EM miss such a
#: change would mend; null otherwise), `exe_acc` (FinQA's execution accuracy) and `program_acc` (FinQA's program
#: accuracy, null where the question has no gold program), `percent_reading` (percent, plain or undecided: whether
#: the question asks for a percentage, for a bare-number gold of a subset whose release dropped its scale; null
#: elsewhere: t2rag.metrics.percent_rule) and `em_if_percent` (EM with that gold read in percent points, where the
#: reading is undecided; null elsewhere).
ANSWER_SCORE_TYPES: dict[str, pa.DataType] = {
    "em": pa.float64(),
    "f1": pa.float64(),
    "em_error": pa.string(),
    "exe_acc": pa.bool_(),
    "program_acc": pa.bool_(),
    "percent_reading": pa.string(),
    "em_if_percent": pa.float64(),
}

#: The TatQaScore field each of TAT-QA's columns is read from.
_TATQA_FIELDS = {"em": "em", "f1": "f1", "em_error": "error", "percent_reading": "percent",
                 "em_if_percent": "em_if_percent"}  # fmt: skip


def answer_scores(
    predictions: Sequence[float | None],
    answer_texts: Sequence[str | None],
    references: Sequence[float | None],
    original_answers: Sequence[str | None],
    programs: Sequence[str | None] | None = None,
    questions: Sequence[str | None] | None = None,
    subsets: Sequence[str | None] | None = None,
) -> dict[str, pa.Array]:
    """The yardstick columns of scored answers: `predictions` the predicted numbers, `answer_texts` the model's
    formulas (what it answered where it gave no number, and the program it wrote), `references` the gold executed
    values, `original_answers` the gold answers as the source wrote them (None: EM and F1 are null), `programs` the
    gold programs (None: no program accuracy), `questions` and `subsets` the questions' texts and subsets (the
    percent rule reads a question of a subset in SCALE_DROPPED; None: no rule)."""
    n = len(predictions)
    cols: dict[str, list] = {name: [] for name in ANSWER_SCORE_TYPES}
    programs = programs if programs is not None else [None] * n
    readings = [
        percent_reading(q) if q is not None and s in SCALE_DROPPED else None
        for q, s in zip(questions or [None] * n, subsets or [None] * n, strict=True)
    ]
    rows = zip(predictions, answer_texts, references, original_answers, programs, readings, strict=True)
    for value, text, reference, original, program, reading in rows:
        cols["exe_acc"].append(execution_match(value, reference))
        cols["program_acc"].append(None if program is None else program_match(text, program))
        score = None if original is None else tatqa_score(value, text, original, reading)
        for name, scored in _TATQA_FIELDS.items():
            cols[name].append(None if score is None else getattr(score, scored))
    return {name: pa.array(values, ANSWER_SCORE_TYPES[name]) for name, values in cols.items()}
