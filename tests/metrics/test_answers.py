"""The yardstick columns of scored answers (t2rag.metrics.answers): each column from its definition, on rows worked
by hand, and their Arrow types whatever the values."""

from __future__ import annotations

import pytest

from t2rag.metrics.answers import ANSWER_SCORE_TYPES, answer_scores


def test_each_column_from_hand_worked_rows():
    out = answer_scores(
        predictions=[0.25, None, 0.132, 0.029],
        answer_texts=["(150 - 120) / 120", "$12.8 million", None, None],
        references=[0.25, 12800000.0, 13.2, 2.9],
        original_answers=["25%", "['$12.8 million']", "13.2", "2.9"],
        programs=["divide(subtract(150, 120), 120)", None, None, None],
        questions=["What was the growth?", "How much?", "What was the percentage change?", "What discount rate?"],
        subsets=["FinQA", "TAT-DQA", "TAT-DQA", "TAT-DQA"],
    )
    values = {name: array.to_pylist() for name, array in out.items()}
    assert values["exe_acc"] == [True, False, False, False]  # FinQA's rounding: 0.25 alone equals its reference
    assert values["program_acc"] == [True, None, None, None]
    assert values["em"] == [1.0, 1.0, 1.0, 0.0]  # 25% is 0.25; the text is the number; 13.2 read in percent
    assert values["f1"] == [1.0, 1.0, 1.0, 0.0]
    assert values["em_error"] == [None, None, None, "scale"]
    assert values["percent_reading"] == [None, None, "percent", "undecided"]  # FinQA is not read
    assert values["em_if_percent"] == [None, None, None, 1.0]


def test_without_programs_questions_or_golds():
    out = answer_scores([7.0, 7.0], [None, None], [7.0, 8.0], [None, "7"])
    values = {name: array.to_pylist() for name, array in out.items()}
    assert values["exe_acc"] == [True, False]
    assert values["program_acc"] == [None, None]
    assert values["em"] == [None, 1.0] and values["f1"] == [None, 1.0]
    assert values["percent_reading"] == [None, None]  # no question: no reading


def test_the_columns_have_their_types_even_when_empty_of_values():
    out = answer_scores([None], [None], [None], [None])
    assert {name: array.type for name, array in out.items()} == ANSWER_SCORE_TYPES


def test_rows_of_different_lengths_are_refused():
    with pytest.raises(ValueError):
        answer_scores([1.0, 2.0], [None], [1.0, 2.0], [None, None])
    with pytest.raises(ValueError):
        answer_scores([1.0], [None], [1.0], ["1"], None, ["What?", "Why?"], ["TAT-DQA"])
