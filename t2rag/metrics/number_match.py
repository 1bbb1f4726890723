"""Number Match, the T2-RAGBench answer metric: a scale-invariant comparison of two numbers.

With a = |reference|, a* = |prediction| and epsilon = 1e-2, a prediction is correct iff
(a* < epsilon and a < epsilon) or |q - 1| < epsilon, where q = (a*/a) * 10^(-round(log10(a*/a))).
Signs are ignored and a power-of-ten factor is forgiven (0.1446 matches 14.46); anything that is not a finite
number, on either side, is incorrect. `round` is half-to-even, as Python's and NumPy's are.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

EPSILON = 1e-2


def to_float_array(values: Sequence[object] | np.ndarray) -> np.ndarray:
    """A float64 array with NaN wherever a value is None or not a finite number."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        out = values.astype(np.float64, copy=True)
    else:
        out = np.array([_as_float(v) for v in values], dtype=np.float64)
    out[~np.isfinite(out)] = np.nan
    return out


def _as_float(value: object) -> float:
    if value is None or isinstance(value, bool):
        return np.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return np.nan


def number_match(
    predictions: Sequence[object] | np.ndarray,
    references: Sequence[object] | np.ndarray,
    epsilon: float = EPSILON,
) -> np.ndarray:
    """Elementwise Number Match of predictions against references, as a boolean array."""
    pred = np.abs(to_float_array(predictions))
    ref = np.abs(to_float_array(references))
    if pred.shape != ref.shape:
        raise ValueError(f"predictions ({pred.shape}) and references ({ref.shape}) differ in length")
    matches = (pred < epsilon) & (ref < epsilon)  # NaN compares False: a missing number never matches
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = pred / ref
    scaled = np.isfinite(ratio) & (ratio > 0)  # zero, overflow and NaN on either side have no power of ten
    r = ratio[scaled]
    log_ratio = np.log10(r)
    with np.errstate(over="ignore"):
        shift = np.power(10.0, -np.round(log_ratio))
    # For subnormal ratios 10^-n overflows; 10^(log10(r) - n) is the same number computed without it.
    q = np.where(np.isfinite(shift), r * shift, np.power(10.0, log_ratio - np.round(log_ratio)))
    matches[scaled] |= np.abs(q - 1.0) < epsilon
    return matches


def number_match_one(prediction: object, reference: object, epsilon: float = EPSILON) -> bool:
    """Number Match for a single pair."""
    return bool(number_match([prediction], [reference], epsilon)[0])
