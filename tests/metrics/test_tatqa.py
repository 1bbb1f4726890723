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


# The four defects of issue 89, each with its input; expected values from TAT-QA's definitions (section 4.2): a
# number right only at its scale, sign kept, bag-of-words F1 with the gold's numbers required to match.
# (original answer, predicted number, answer text, EM, F1)
DEFECTS = [
    # a number inside a span keeps its decimal point after a currency sign: 5.47 is not 54.7, so the bags share
    # {decreased, million} but not the gold's number, and F1 is 0 by the numbers rule (before: EM 1, F1 1)
    ("['Decreased $54.7 million']", None, "Decreased $5.47 million", 0, 0.0),
    ("['Decreased $54.7 million']", None, "decreased $54.70 million", 1, 1.0),  # 54.70 is 54.7 at 2 decimals
    ("['decreased $352 million']", None, "decreased $35.2 million", 0, 0.0),  # the real row's gold (10855)
    # a text answer that is wholly a number is that number at its own scale (before: EM 0, F1 0)
    ("['$12.8 million']", None, "$12.8 million", 1, 1.0),
    ("['$12.8 million']", None, "12800000", 1, 1.0),
    ("['$12.8 million']", None, "$12.8", 0, 0.0),  # 12.8 is not 12.8 million
    ("['(1,212)']", None, "-1,212", 1, 1.0),  # the sign kept
    # F1 of a text answer against a one-number gold is the bag's: {about, 0.67} against {0.67}: p 1/2, r 1/1,
    # F1 2 * (1/2) * 1 / (3/2) = 2/3 (before: F1 = EM = 0)
    ("['67%']", None, "about 67%", 0, 2 / 3),
    ("['67%']", None, "about 68%", 0, 0.0),  # the gold's number absent
    # a currency code is a currency: US$6 million is 6,000,000 (before: EM 0)
    ("['US$6 million']", 6000000.0, None, 1, 1.0),
    ("['US$6 million']", 6.0, None, 0, 0.0),
    ("['US$15.9 million']", 15900000.0, None, 1, 1.0),  # the real row 11237
    ("['RMB77 million']", 77000000.0, None, 1, 1.0),  # the real row 10399
]


@pytest.mark.parametrize(("original", "prediction", "text", "em", "f1"), DEFECTS)
def test_each_defect_scores_as_tatqa_defines_it(original, prediction, text, em, f1):
    score = tatqa_score(prediction, text, original)
    assert (score.em, score.f1) == (em, pytest.approx(f1, abs=1e-4))


def test_the_real_rows_of_the_defects_write_their_golds_so():
    assert ORIGINAL["tatqa_dev_10855"] == "['decreased $352 million']"
    assert ORIGINAL["tatqa_dev_11237"] == "['US$15.9 million']"
    assert ORIGINAL["tatqa_dev_10399"] == "['RMB77 million']"


# A bare-number gold with the percent rule's reading (t2rag.metrics.percent_rule), on real rows:
# (question id, reading, predicted number, EM, error kind, EM with the gold read in percent points)
PERCENT = [
    # "What is the percentage change in order intake ...": 13.2 is 13.2%, so the fraction 0.132 is right
    ("tatqa_dev_10207", "percent", 0.132, 1, None, None),
    ("tatqa_dev_10207", "percent", 13.2, 0, "scale", None),  # 13.2 as a fraction is 1320%
    ("tatqa_dev_10207", "percent", -0.132, 0, "sign", None),
    ("tatqa_dev_10207", None, 0.132, 0, "scale", None),  # without the rule, as before
    ("tatqa_dev_10207", None, 13.2, 1, None, None),
    # "... which year showed a higher gross margin (%)?": a year, read as written
    ("tatqa_dev_10208", "plain", 2019.0, 1, None, None),
    # "What proportion of the total Level 2 inputs ...": 0.45 or 0.45%; scored as written, both kept
    ("tatqa_dev_10487", "undecided", 0.45, 1, None, 0),
    ("tatqa_dev_10487", "undecided", 0.0045, 0, "scale", 1),
    # "What discount rate did Woolworths Limited use ...": 2.9 (in percent, as its table prints it)
    ("tatqa_dev_10229", "undecided", 0.029, 0, "scale", 1),
]


@pytest.mark.parametrize(("qid", "reading", "prediction", "em", "error", "em_if_percent"), PERCENT)
def test_a_percent_reading_scores_the_gold_in_percent_points(qid, reading, prediction, em, error, em_if_percent):
    score = tatqa_score(prediction, None, ORIGINAL[qid], reading)
    assert (score.em, score.f1, score.error) == (em, em, error)
    assert (score.percent, score.em_if_percent) == (reading, em_if_percent)


def test_a_percent_reading_leaves_golds_that_write_their_scale_alone():
    """The rule reads bare numbers only: a gold with a percent sign, money or a scale word, or a list of spans, is
    scored as written and carries no reading."""
    for original, prediction in (("['3.7%']", 0.037), ("['$533 million']", 533e6), ("['2018', '2019']", 2019.0)):
        plain = tatqa_score(prediction, None, original)
        read = tatqa_score(prediction, None, original, "percent")
        assert (read.em, read.f1, read.error, read.percent) == (plain.em, plain.f1, plain.error, None)


def test_a_text_answer_against_a_percent_gold_is_read_as_a_predicted_number_or_at_its_own_scale():
    """A text without a scale word is read as a predicted number (0.132 is the fraction of the percent-points gold
    13.2, and 13.2 is off by a power of ten, as the number 13.2 is); a text with one is that number: 13.2%."""
    original = ORIGINAL["tatqa_dev_10207"]
    scores = [tatqa_score(None, text, original, "percent") for text in ("0.132", "13.2%", "13.2")]
    assert [(s.em, s.error) for s in scores] == [(1, None), (1, None), (0, "scale")]


# Edges of the definitions, each worked by hand: (original answer, predicted number, answer text, percent reading,
# EM, F1, error kind)
EDGES = [
    ("['the Americas']", None, "Europe", None, 0, 0.0, None),  # no word in common
    ("0", 5.0, None, None, 0, 0.0, None),  # no power of ten or sign turns 5 into 0: no error kind
    ("5", 0.0, None, None, 0, 0.0, None),  # nor 0 into 5
    ("-5", 0.0, None, None, 0, 0.0, None),  # nor into -5
    ("['December 2021']", 2021.004, None, None, 0, 0.6667, None),  # 2021.00 at 2 decimals: p 1/1, r 1/2
    ("5", float("inf"), None, None, 0, 0.0, None),  # not a number to compare
    ("0", -0.001, None, None, 1, 1.0, None),  # -0.001 is 0.00 at 2 decimals, and -0 is 0
    ("['$533 million']", 533.1, None, None, 0, 0.0, None),  # 533,100,000 is not 533,000,000: no scale error
    ("['up 5%, to $54.7 million']", None, "up 5% to $54.7 million", None, 1, 1.0, None),  # "5%," is 5%
    ("[]", 5.0, None, None, 0, 0.0, None),  # an empty gold matches nothing
    ("['']", None, "", None, 0, 0.0, None),
    ("['$13.2']", 0.132, None, "percent", 0, 0.0, "scale"),  # money, never read as a percentage
    ("['-']", 0.0, None, "percent", 0, 0.0, None),  # not a number: never read as one
    ("1,2,3", 123.0, None, "percent", 1, 1.0, None),  # digits but not one number (its groups are not of 3)
    ("0.45", None, "0.45", "undecided", 1, 1.0, None),  # a text number, read as written and as a percentage
]


@pytest.mark.parametrize(("original", "prediction", "text", "percent", "em", "f1", "error"), EDGES)
def test_edges_of_the_definitions(original, prediction, text, percent, em, f1, error):
    score = tatqa_score(prediction, text, original, percent)
    assert (score.em, score.f1, score.error) == (em, f1, error)


def test_f1_is_kept_to_4_decimals():
    assert tatqa_score(None, "about 67%", "['67%']").f1 == 0.6667  # 2/3


def test_an_undecided_text_answer_keeps_both_readings():
    score = tatqa_score(None, "0.45", "0.45", "undecided")
    assert (score.em, score.percent, score.em_if_percent) == (1.0, "undecided", 0.0)  # 0.45 is not 0.45%
    score = tatqa_score(None, "0.0045", "0.45", "undecided")
    assert (score.em, score.em_if_percent) == (0.0, 1.0)


def test_gold_spans_keep_a_tuple_looking_number_whole():
    assert gold_spans("(1,212)") == ["(1,212)"]  # an accounting negative, not a Python tuple
    assert gold_spans("[1, 2.5]") == ["1", "2.5"]
    assert gold_spans("['a', 'b'] plus") == ["['a', 'b'] plus"]
    assert gold_spans("[x, y]") == ["[x, y]"]  # brackets without a Python list inside
    assert gold_spans("[5]") == ["5"]
    assert gold_spans("['2018'] # a note") == ["['2018'] # a note"]  # a list and more is one span
