"""Number Match exactly as the paper defines it, including its edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from t2rag.metrics import number_match, number_match_one


def reference_definition(pred: float, ref: float, eps: float = 1e-2) -> bool:
    """The paper's formula, written literally with Python scalars."""
    if pred is None or ref is None or not (math.isfinite(pred) and math.isfinite(ref)):
        return False
    a, a_star = abs(ref), abs(pred)
    if a_star < eps and a < eps:
        return True
    if a == 0 or a_star == 0:
        return False
    ratio = a_star / a
    if not math.isfinite(ratio) or ratio == 0:  # overflow or underflow: no power of ten brings it near 1
        return False
    n = round(math.log10(ratio))
    try:
        q = ratio * 10.0 ** (-n)
    except OverflowError:  # subnormal ratio: the same value without the overflowing power
        q = 10.0 ** (math.log10(ratio) - n)
    return abs(q - 1) < eps


@pytest.mark.parametrize(
    ("pred", "ref", "expected"),
    [
        (127.4, 127.4, True),
        (0.1446, 14.46, True),  # percentage as fraction vs as percent: scale-invariant
        (14.46, 0.1446, True),
        (1446.0, 14.46, True),
        (-5.0, 5.0, True),  # signs are ignored
        (127.0, 127.4, True),  # 0.3% off
        (125.0, 127.4, False),  # 1.9% off
        (1.0099, 1.0, True),  # just inside epsilon
        (1.0101, 1.0, False),  # just outside
        (0.0, 0.0, True),
        (0.005, 0.009, True),  # both below epsilon
        (0.005, 0.5, True),  # only the prediction is small, but the ratio is exactly 10^-2, so q = 1
        (0.0, 3.0, False),
        (3.0, 0.0, False),
        (None, 3.0, False),
        (3.0, None, False),
        (float("nan"), 3.0, False),
        (float("inf"), 3.0, False),
        (3.0, float("nan"), False),
        (31.0, 100.0, False),  # ratio 0.31: log10=-0.51 rounds to -1, q=3.1
        (9.95, 1.0, True),  # ratio 9.95: rounds to 10^1, q=0.995
        (0.3162, 1.0, False),  # near sqrt(10)/10: q=3.16
        (1e-305, 1e4, True),  # subnormal ratio 1e-309: 10^309 overflows, but q is exactly 1
        (1.0099e-310, 1.0, True),  # subnormal ratio whose q is just inside epsilon (with 11^x: just outside)
        (1.5e-310, 1.0, False),
        (100.99999999999997, 1.0, True),  # q one ulp under 1.01: 10^(log10 r - n) rounds it to 1.01, outside
        (0.01, 0.005, False),  # exactly epsilon is not below it: the ratio decides (q = 2)
        (0.005, 0.01, False),
        (0.01, 0.01, True),
    ],
)
def test_hand_worked_cases(pred, ref, expected):
    assert number_match_one(pred, ref) is expected
    assert reference_definition(pred, ref) is expected


def test_vectorised_equals_scalar_on_real_answers(sample):
    refs = sample.table.column("answer_value").to_numpy(zero_copy_only=False)
    rng = np.random.default_rng(0)
    preds = refs * rng.choice([1.0, 100.0, 0.01, 1.004, 1.02, -1.0, 0.0], size=len(refs))
    got = number_match(preds, refs)
    want = [reference_definition(p, r) for p, r in zip(preds.tolist(), refs.tolist(), strict=True)]
    assert got.tolist() == want
    # Every reference matches itself except the eight non-numeric ones.
    assert int(number_match(refs, refs).sum()) == len(refs) - 8


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@given(finite, finite)
def test_matches_literal_definition(pred, ref):
    assert number_match_one(pred, ref) == reference_definition(pred, ref)


@given(st.floats(min_value=1e-3, max_value=1e9), st.integers(min_value=-6, max_value=6))
def test_power_of_ten_invariance(value, power):
    assert number_match_one(value * 10.0**power, value)


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match=r"predictions \(\(1,\)\) and references \(\(2,\)\) differ in length"):
        number_match([1.0], [1.0, 2.0])


def test_booleans_are_not_numbers_and_numeric_text_is():
    assert number_match([True, 1.0, "12.5", "n/a"], [1.0, False, 12.5, 12.5]).tolist() == [False, False, True, False]


def test_epsilon_is_the_callers():
    assert not number_match_one(1.05, 1.0) and number_match_one(1.05, 1.0, epsilon=0.1)
    assert number_match([0.05, 1.05], [0.09, 1.0], epsilon=0.1).tolist() == [True, True]


def test_the_callers_arrays_are_left_alone():
    preds = np.array([1.0, np.inf, np.nan])
    assert number_match(preds, np.array([1.0, 1.0, 1.0])).tolist() == [True, False, False]
    assert preds[1] == np.inf  # not overwritten with NaN in place
    assert number_match(np.array([3, 0]), [3.0, 0.0]).tolist() == [True, True]  # integer arrays too
    assert number_match(np.array([None, 3.0], dtype=object), [1.0, 3.0]).tolist() == [False, True]


def test_no_numpy_warnings_on_zeros_overflow_subnormals_and_missing_values():
    """Zero on either side, a ratio that overflows, a subnormal ratio and NaN are decided without NumPy's
    divide, overflow or invalid warnings (under `-W error` they would be errors)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = number_match([0.0, 5.0, 1e308, 1e-310, float("nan"), 1.0, 2.0], [5.0, 0.0, 1e-300, 1.0, 1.0, 1.0, 2.0])
    assert got.tolist() == [False, False, False, True, False, True, True]  # 1e-310 is 10^-310 times 1


def test_numeric_text_in_an_object_array_is_read_one_by_one():
    got = number_match(np.array(["n/a", "2.5", None], dtype=object), [1.0, 2.5, 1.0])
    assert got.tolist() == [False, True, False]
