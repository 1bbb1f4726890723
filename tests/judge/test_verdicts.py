"""Reading a judge's reply: the better answer and the reasoning, or unparsed when it names neither."""

from __future__ import annotations

import pytest

from t2rag.judge.run import winner_of
from t2rag.judge.verdicts import parse_verdict


@pytest.mark.parametrize(
    ("reply", "choice", "reasoning"),
    [
        ('{"reasoning": "2 has the sign right", "better": "2"}', "2", "2 has the sign right"),
        ('Sure. {"reasoning": "equal", "better": "tie"}', "tie", "equal"),
        ('{"better": 1, "reasoning": "closer"}', "1", "closer"),
        ('{"Better": "Answer 2"}', "2", None),
        ("better: answer 1, since its value is the reference's", "1", None),  # no JSON: the key read as text
        ("I cannot tell these apart.", None, None),
        ('{"reasoning": "both wrong", "better": "neither"}', None, None),
        ('{"better": true}', None, None),
        ("", None, None),
    ],
)
def test_replies(reply, choice, reasoning):
    assert parse_verdict(reply) == (choice, reasoning)


def test_a_choice_names_a_side_by_the_order_it_was_asked_in():
    assert winner_of("1", "method_first") == "method" and winner_of("2", "method_first") == "baseline"
    assert winner_of("1", "baseline_first") == "baseline" and winner_of("2", "baseline_first") == "method"
    assert winner_of("tie", "baseline_first") == "tie" and winner_of(None, "method_first") is None
