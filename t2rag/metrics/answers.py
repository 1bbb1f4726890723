"""The answer yardsticks of T2-RAGBench's family, per record, beside Number Match: TAT-QA's EM and F1 with the error
kind of an EM miss (t2rag.metrics.tatqa) and FinQA's execution and program accuracy (t2rag.metrics.finqa). One
function for every place answers are scored (the parse stage, `t2rag score` of a predictions file)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from t2rag.metrics.finqa import execution_match, program_match
from t2rag.metrics.tatqa import tatqa_score

#: The record columns these yardsticks fill: `em` (0 or 1) and `f1` (0..1) against the question's
#: `original_answer` (null where the source has none), `em_error` (scale, sign or scale_sign: an EM miss such a
#: change would mend; null otherwise), `exe_acc` (FinQA's execution accuracy) and `program_acc` (FinQA's program
#: accuracy, null where the question has no gold program).
ANSWER_SCORE_TYPES: dict[str, pa.DataType] = {
    "em": pa.float64(),
    "f1": pa.float64(),
    "em_error": pa.string(),
    "exe_acc": pa.bool_(),
    "program_acc": pa.bool_(),
}


def answer_scores(
    predictions: Sequence[float | None],
    answer_texts: Sequence[str | None],
    references: Sequence[float | None],
    original_answers: Sequence[str | None],
    programs: Sequence[str | None] | None = None,
) -> dict[str, pa.Array]:
    """The yardstick columns of scored answers: `predictions` the predicted numbers, `answer_texts` the model's
    formulas (what it answered where it gave no number, and the program it wrote), `references` the gold executed
    values, `original_answers` the gold answers as the source wrote them (None: EM and F1 are null), `programs` the
    gold programs (None: no program accuracy)."""
    cols: dict[str, list] = {name: [] for name in ANSWER_SCORE_TYPES}
    programs = programs if programs is not None else [None] * len(predictions)
    rows = zip(predictions, answer_texts, references, original_answers, programs, strict=True)
    for value, text, reference, original, program in rows:
        cols["exe_acc"].append(execution_match(value, reference))
        cols["program_acc"].append(None if program is None else program_match(text, program))
        if original is None:
            cols["em"].append(None)
            cols["f1"].append(None)
            cols["em_error"].append(None)
            continue
        score = tatqa_score(value, text, original)
        cols["em"].append(score.em)
        cols["f1"].append(score.f1)
        cols["em_error"].append(score.error)
    return {name: pa.array(values, ANSWER_SCORE_TYPES[name]) for name, values in cols.items()}
