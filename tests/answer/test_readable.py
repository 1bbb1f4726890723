"""The readable reply a served chat completion ends with: the parsed answer as a person writes it."""

from __future__ import annotations

from t2rag.answer.readable import ReadableAnswer, number_text


def test_the_reply_ends_with_the_answer_as_written():
    assert number_text(2.0) == "2" and number_text(-0.0) == "0" and number_text(12.50) == "12.5"
    assert ReadableAnswer().finish(2.0, None) == "Answer: 2"
    assert ReadableAnswer().finish(None, None) == "Answer: no number could be read"
    reply = ReadableAnswer()
    body = reply.add('{"reasoning_steps": ["half of 25"], "final_formula": "divide(25, 2)"}')
    assert body + reply.finish(12.5, "divide(25, 2)") == "1. half of 25\nFormula: divide(25, 2)\n\nAnswer: 12.5"
