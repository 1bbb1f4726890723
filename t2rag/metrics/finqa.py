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
