"""The answer yardsticks of T2-RAGBench's family, per record, beside Number Match: TAT-QA's EM and F1 with the error
kind of an EM miss (t2rag.metrics.tatqa) and FinQA's execution accuracy (t2rag.metrics.finqa). One function for
every place answers are scored (the parse stage, `t2rag score` of a predictions file)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from t2rag.metrics.finqa import execution_match
from t2rag.metrics.tatqa import tatqa_score

#: The record columns these yardsticks fill: `em` (0 or 1) and `f1` (0..1) against the question's
#: `original_answer` (null where the source has none), `em_error` (scale, sign or scale_sign: an EM miss such a
#: change would mend; null otherwise) and `exe_acc` (FinQA's execution accuracy).
ANSWER_SCORE_TYPES: dict[str, pa.DataType] = {
    "em": pa.float64(),
    "f1": pa.float64(),
    "em_error": pa.string(),
    "exe_acc": pa.bool_(),
}


def answer_scores(
    predictions: Sequence[float | None],
    answer_texts: Sequence[str | None],
    references: Sequence[float | None],
    original_answers: Sequence[str | None],
) -> dict[str, pa.Array]:
    """The yardstick columns of scored answers: `predictions` the predicted numbers, `answer_texts` what the model
    answered where it gave no number (its formula), `references` the gold executed values, `original_answers` the
    gold answers as the source wrote them (None: EM and F1 are null)."""
    cols: dict[str, list] = {name: [] for name in ANSWER_SCORE_TYPES}
    for value, text, reference, original in zip(predictions, answer_texts, references, original_answers, strict=True):
        cols["exe_acc"].append(execution_match(value, reference))
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
