"""TAT-QA's EM and F1 on real TAT-DQA answers (and written-out span lists, which the hub's release holds none of),
each expected value worked out by hand in the table."""

from __future__ import annotations

import pytest

from t2rag.metrics.tatqa import gold_spans, tatqa_score
from tests.conftest import real_table


def _original_answers() -> dict[str, str]:
    table = real_table("TAT-DQA").select(["id", "original_answer"]).to_pylist()
    return {r["id"]: r["original_answer"] for r in table}


ORIGINAL = _original_answers()

# (question id or None, original answer as the data writes it, predicted number, answer text, EM, F1, error kind)
HAND_WORKED = [
    # a scale word: the number counts times its scale
    ("tatqa_dev_10211", "['$533 million']", 533000000.0, None, 1, 1.0, None),
    ("tatqa_dev_10211", "['$533 million']", 533.0, None, 0, 0.0, "scale"),  # "0.22" is not "0.22 million"
    # an accounting negative is negative, and the sign counts
    ("tatqa_dev_10212", "['(1,212)']", -1212.0, None, 1, 1.0, None),
    ("tatqa_dev_10212", "['(1,212)']", 1212.0, None, 0, 0.0, "sign"),
    ("tatqa_dev_10212", "['(1,212)']", -1.212, None, 0, 0.0, "scale"),
    ("tatqa_dev_10212", "['(1,212)']", 1.212, None, 0, 0.0, "scale_sign"),
    ("tatqa_dev_10792", "['£(8.1m)']", -8100000.0, None, 1, 1.0, None),
    ("tatqa_dev_10792", "['£(8.1m)']", 8100000.0, None, 0, 0.0, "sign"),
    # a percentage: t2rag's prompt asks for fractions, so 0.037 is 3.7%; 3.7 is off by a power of ten
    ("tatqa_dev_10273", "['3.7%']", 0.037, None, 1, 1.0, None),
    ("tatqa_dev_10273", "['3.7%']", 3.7, None, 0, 0.0, "scale"),
    # a plain signed number, compared at 2 decimals
    ("tatqa_dev_10210", "-78.06", -78.06, None, 1, 1.0, None),
    ("tatqa_dev_10210", "-78.06", -78.0649, None, 1, 1.0, None),
    ("tatqa_dev_10210", "-78.06", 78.06, None, 0, 0.0, "sign"),
    ("tatqa_dev_10210", "-78.06", -78.07, None, 0, 0.0, None),  # a wrong number: no F1 credit for a number
    # a text span: DROP's bag of words, numbers matched where the gold has any
    ("tatqa_dev_10277", "['December 2021']", 2021.0, None, 0, 0.6667, None),  # p 1/1, r 1/2
    ("tatqa_dev_10277", "['December 2021']", None, "december, 2021.", 1, 1.0, None),
    ("tatqa_dev_10855", "['decreased $352 million']", 352.0, None, 0, 0.5, None),  # p 1/1, r 1/3
    ("tatqa_dev_10855", "['decreased $352 million']", 352000000.0, None, 0, 0.0, None),  # the gold's number absent
    ("tatqa_dev_10855", "['decreased $352 million']", None, "None", 0, 0.0, None),
    # no answer at all
    ("tatqa_dev_10211", "['$533 million']", None, None, 0, 0.0, None),
    # lists of spans (TAT-QA's multi-span answers): one prediction aligns with at most one gold span
    (None, "['2018', '2019']", 2019.0, None, 0, 0.5, None),  # 1 of 2 spans right: (1 + 0) / 2
    (None, "['Interest income', 'Other income']", None, "interest income", 0, 0.5, None),  # (1 + 0) / 2
    (None, "['the Americas']", None, "Americas", 1, 1.0, None),  # articles and case dropped
]


@pytest.mark.parametrize(("qid", "original", "prediction", "text", "em", "f1", "error"), HAND_WORKED)
def test_em_and_f1_as_worked_by_hand(qid, original, prediction, text, em, f1, error):
    if qid is not None:
        assert ORIGINAL[qid] == original  # the answer as the real dev row writes it
    score = tatqa_score(prediction, text, original)
    assert (score.em, score.f1, score.error) == (em, pytest.approx(f1, abs=1e-4), error)


def test_gold_spans_read_python_lists_and_plain_text():
    assert gold_spans("['$533 million']") == ["$533 million"]
    assert gold_spans("['2018', '2019']") == ["2018", "2019"]
    assert gold_spans("-78.06") == ["-78.06"]
    assert gold_spans("[not a list") == ["[not a list"]


def test_every_real_tatdqa_answer_scores_its_own_value_right():
    """The gold's own value (sign and scale as written) is an exact match on every real row whose answer is one
    number: percentages given as fractions, t2rag's convention."""
    from t2rag.answer.numerals import parse_scaled

    checked = 0
    for original in ORIGINAL.values():
        spans = gold_spans(original)
        scaled = parse_scaled(spans[0]) if len(spans) == 1 else None
        if scaled is None:
            continue
        value, power = scaled
        assert tatqa_score(float(value.scaleb(power)), None, original).em == 1, original
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize("prediction", [1e30, -1e300, 1.7e308, 1e-300, 5e-324, 123456789012345678901234567890.0])
def test_any_finite_prediction_is_scored_without_raising(prediction):
    for original in ("['$533 million']", "-78.06", "['December 2021']", "['1e300']"):
        score = tatqa_score(prediction, None, original)
        assert score.em in (0.0, 1.0) and 0.0 <= score.f1 <= 1.0
    assert tatqa_score(prediction, None, repr(prediction)).em == 1.0  # a huge gold is still itself
