"""FinQA's execution accuracy (Chen et al., EMNLP 2021, section 3 "Evaluations"): an answer is right when its value
equals the gold program's executed value, both rounded to 5 decimals as FinQA's evaluation script rounds them.
Unlike Number Match, the sign and the power of ten count. Yes/no answers are 1 and 0 on both sides."""

from __future__ import annotations

import math

#: The decimals FinQA's evaluation rounds executed values to.
EXE_DECIMALS = 5


def execution_match(prediction: float | None, reference: float | None) -> bool:
    """Whether a predicted value equals the gold executed value at FinQA's rounding; a missing or non-finite value
    on either side is wrong."""
    if prediction is None or reference is None:
        return False
    if not (math.isfinite(prediction) and math.isfinite(reference)):
        return False
    return round(prediction, EXE_DECIMALS) == round(reference, EXE_DECIMALS)


def program_match(predicted: str | None, gold: str | None) -> bool:
    """FinQA's program accuracy: whether the predicted program (a FinQA-style program or an infix formula) computes
    the same thing as the gold program, its arguments read as symbols (each number by its value, each table
    operation by its row), so `add(a, b)` equals `b + a` but not `add(a, c)`. A program that does not parse is
    wrong."""
    import sympy

    from t2rag.answer.formula import symbolic_program

    if not predicted or not gold:
        return False
    mine, theirs = symbolic_program(predicted), symbolic_program(gold)
    if mine is None or theirs is None:
        return False
    try:
        return sympy.simplify(mine - theirs) == 0
    except (TypeError, ValueError, RecursionError):
        return False
