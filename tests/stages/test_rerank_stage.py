"""What a reranking plugin's scores may be (t2rag.stages.rerank.scores_problem): one finite number per candidate of
each question, and the line that names what is wrong otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.stages.rerank import scores_problem


@pytest.mark.parametrize(
    ("scores", "problem"),
    [
        ([[1.0, 0.5], [2.0]], None),
        ((np.array([0.1, 0.2]), [3]), None),
        ([[1.0, 0.5]], "scores for 1 questions of 2 (a row dropped or added)"),
        (None, "scores for NoneType questions of 2 (a row dropped or added)"),
        ([[1.0], [2.0]], "1 scores for the 2 candidates of question 0"),
        ([[1.0, 0.5], 2.0], "a float, not a list of scores, for question 1"),
        ([[1.0, 0.5], "a"], "a str, not a list of scores, for question 1"),
        ([[1.0, "high"], [2.0]], "scores that are not numbers for question 0"),
        ([[1.0, float("nan")], [2.0]], "a score that is not a finite number for question 0"),
        ([[1.0, 0.5], [[2.0]]], "a score that is not a finite number for question 1"),
    ],
)
def test_scores_one_finite_number_per_candidate(scores, problem):
    assert scores_problem(scores, [2, 1]) == problem
