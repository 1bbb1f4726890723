"""TAT-QA's Exact Match and numeracy-focused F1 (Zhu et al., ACL 2021, section 4.2), and the error kinds of its
error analysis that a record alone can tell (its Table 6: a scale error, and a sign error).

TAT-QA scores with DROP's metrics (Dua et al., 2019) changed in two ways: a number's sign counts, and a number is
right only when the predicted number times its scale equals the ground truth ("0.22" is not "0.22 million").

The gold is a question's `original_answer`: one span, or a list of spans written as a Python list
(``"['$533 million']"``, ``"['2018', '2019']"``). Each span is normalised to one string:

- a span that is wholly a number (currency signs and codes such as ``US$`` or ``RMB``, thousands separators,
  accounting negatives such as ``(1,212)``, a percent sign or a scale word allowed) becomes its value, rounded to 2
  decimals in the unit it is written in and then scaled: ``$533 million`` is 533000000, ``(1,212)`` is -1212;
- any other span is DROP-normalised: lower case, punctuation and the articles a/an/the removed, white space
  collapsed, and each token that is a number (currency sign and percent sign allowed) written as its value, rounded
  as a whole-number span is: ``$54.7`` is 54.7, never 547. Unlike DROP, tokens are split on spaces only, so a minus
  sign stays with its number.

A gold that is one bare number in a subset whose release dropped TAT-QA's scale column (TAT-DQA) is read in percent
points when its question asks for a percentage (t2rag.metrics.percent_rule): the gold "60" of "what was the
percentage change ..." is 60%, as TAT-QA's `scale` says it is. A question the rule cannot decide is scored with the
gold as written, and its EM with the gold read as a percentage is kept beside it (`em_if_percent`).

The prediction is t2rag's predicted number (the `prediction` column; t2rag's generators answer with a formula whose
value it is) with no scale of its own, so it is read as the unit it is in: rounded to 2 decimals and compared with
the gold's scaled value. One convention follows t2rag's answer prompt, which asks for percentages as fractions
(0.145 for 14.5%): against a gold written as a percentage the prediction is read as a fraction. Where no number
was predicted, the answer's text (a formula that did not evaluate, say "None") is the prediction: a text that is
wholly a number is read as that number, at the scale it writes ("$12.8 million") or, writing none, as a predicted
number is read; any other text is a span.

- EM: 1 when the normalised predicted spans and gold spans are the same bag.
- F1: DROP's bag-of-words F1, each gold span aligned with at most one predicted span (optimal assignment, a pair
  scoring only when their numbers agree where the gold has any), averaged over the larger of the two counts. A
  number against a number scores 1 or 0 (no partial credit for a number); a text answer holding the gold's number
  beside other words gets partial credit ("about 67%" against "67%": 2/3).

An EM miss whose gold is one number and whose prediction is a number is then a **scale** error when the prediction
times a power of ten other than one is right, a **sign** error when its negation is right, **scale_sign** when both
are needed, and otherwise none of these (null).
"""

from __future__ import annotations

import ast
import math
import re
import string
from dataclasses import dataclass, replace
from decimal import Decimal, localcontext

import numpy as np
from scipy.optimize import linear_sum_assignment

from t2rag.answer.numerals import parse_scaled
from t2rag.metrics.percent_rule import PercentReading

#: The error kinds of `em_error`.
ERROR_KINDS = ("scale", "sign", "scale_sign")

_ARTICLES = frozenset({"a", "an", "the"})
_PUNCTUATION = frozenset(string.punctuation)
_CENT = Decimal("0.01")
_DIGITS = 700
#: A currency code before a number ("US$6 million", "A$ 12", "RMB77 million", "USD 5"): the number is its value.
_CURRENCY_CODE = re.compile(r"^(?:[A-Z]{1,3}(?=\$)|(?:USD|EUR|GBP|RMB|CNY|HKD|JPY|INR|AUD|CAD|SEK|CHF)\s?(?=[0-9(.]))")
#: Punctuation that ends a token without belonging to its number ("2021.", "5,").
_TRAILING = ",;:!?'\""
#: A number written bare: digits, separators, a sign or an accounting negative's parentheses, and nothing else.
_BARE = re.compile(r"[\s0-9.,()+\-\u2212]+")


@dataclass(frozen=True)
class TatQaScore:
    """One answer's TAT-QA scores: `em` (0 or 1), `f1` in [0, 1], `error` (one of `ERROR_KINDS` or None),
    `percent` the percent rule's reading where it was applied (a bare-number gold; else None), and `em_if_percent`,
    the EM with the gold read in percent points where the rule could not decide (else None)."""

    em: float
    f1: float
    error: str | None = None
    percent: PercentReading | None = None
    em_if_percent: float | None = None


def gold_spans(original_answer: str) -> list[str]:
    """The spans of an `original_answer`: the items of a Python-list string, else the text itself."""
    text = original_answer.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return [text]
    try:
        items = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return [text]
    return [str(item) for item in items]  # a literal in brackets is a list


def _rounded(value: Decimal, power: int) -> Decimal:
    """A number written as `value` at scale 10**power: rounded to 2 decimals as written, then scaled. The context
    holds every digit of the largest float (about 1e308) to the cent, which the default 28 digits do not."""
    with localcontext() as context:
        context.prec = _DIGITS
        return value.quantize(_CENT).scaleb(power).normalize()


def _number_key(value: Decimal) -> str:
    with localcontext() as context:
        context.prec = _DIGITS
        return format(value.normalize() + 0, "f")  # `+ 0` turns -0 into 0


def _is_float(token: str) -> bool:
    try:
        return math.isfinite(float(token))
    except ValueError:
        return False


def _scaled(text: str) -> tuple[Decimal, int] | None:
    """A number as written and its scale's power of ten (`parse_scaled`), a currency code before it allowed."""
    return parse_scaled(_CURRENCY_CODE.sub("", text.strip()))


def _token_key(token: str) -> str:
    """A token's normalised form: a number's rounded value (its currency or percent sign read, not dropped), else
    the token without punctuation."""
    scaled = _scaled(token.rstrip(_TRAILING))
    if scaled is not None:
        return _number_key(_rounded(*scaled))
    return "".join(c for c in token.lower() if c not in _PUNCTUATION)


def _text_key(span: str) -> str:
    """DROP's normalisation of a text span, with tokens split on spaces only (a sign stays)."""
    keys = (_token_key(token) for token in span.split())
    return " ".join(key for key in keys if key and key not in _ARTICLES)


@dataclass(frozen=True)
class _Span:
    key: str
    number: Decimal | None  # the scaled, rounded value of a span that is wholly a number
    power: int = 0  # the power of ten its scale stands for


def _span(span: str) -> _Span:
    """A gold span, or a text answer, normalised: wholly a number, or DROP's bag of words."""
    scaled = _scaled(span)
    if scaled is None:
        return _Span(_text_key(span), None)
    value, power = scaled
    number = _rounded(value, power)
    return _Span(_number_key(number), number, power)


def _in_percent(span: str) -> _Span | None:
    """A bare number (no currency, percent sign or scale word) read in percent points; None for any other span."""
    scaled = parse_scaled(span)
    if scaled is None or scaled[1] != 0 or not _BARE.fullmatch(span):
        return None
    number = _rounded(scaled[0], -2)
    return _Span(_number_key(number), number, -2)


def _predicted_number(prediction: float, in_percent: bool, shift: int = 0) -> Decimal:
    """A finite prediction (times 10**shift) as TAT-QA compares it: rounded to 2 decimals in its own unit (a
    fraction against a gold in percent, t2rag's answer convention, so in percent points there)."""
    value = Decimal(repr(float(prediction))).scaleb(shift)
    return _rounded(value.scaleb(2), -2) if in_percent else _rounded(value, 0)


def _bag_f1(predicted: _Span, gold: _Span) -> float:
    gold_tokens, predicted_tokens = set(gold.key.split()), set(predicted.key.split())
    gold_numbers = {t for t in gold_tokens if _is_float(t)}
    if gold_numbers and not gold_numbers & {t for t in predicted_tokens if _is_float(t)}:
        return 0.0
    common = len(gold_tokens & predicted_tokens)
    if not common:
        return 0.0
    precision, recall = common / len(predicted_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _aligned_f1(predicted: list[_Span], gold: list[_Span]) -> float:
    scores = np.array([[_bag_f1(p, g) for p in predicted] for g in gold])
    rows, cols = linear_sum_assignment(-scores)
    return float(scores[rows, cols].sum()) / max(len(gold), len(predicted))


def _error_kind(prediction: float, gold: _Span) -> str | None:
    """scale, sign or scale_sign when that change to the prediction makes it the gold; None otherwise."""
    if gold.number is None or gold.number == 0 or prediction == 0 or not math.isfinite(prediction):
        return None
    for kind, sign in (("sign", -1.0), (None, 1.0)):
        candidate = sign * prediction
        if (candidate > 0) != (gold.number > 0):
            continue
        shift = round(float(abs(gold.number).log10()) - math.log10(abs(candidate)))
        if kind == "sign" and _predicted_number(candidate, gold.power == -2) == gold.number:
            return "sign"
        if shift and _predicted_number(candidate, gold.power == -2, shift) == gold.number:
            return "scale_sign" if kind == "sign" else "scale"
    return None


def tatqa_score(
    prediction: float | None,
    answer_text: str | None,
    original_answer: str,
    percent: PercentReading | None = None,
) -> TatQaScore:
    """EM, F1 and the error kind of one answer: `prediction` the predicted number (None: none), `answer_text` what
    the model answered where it gave no number (or None), `percent` whether the question asks for a percentage
    (t2rag.metrics.percent_rule; None: the gold's scale is as written, as in every release that keeps it)."""
    spans = gold_spans(original_answer)
    gold = [g for g in map(_span, spans) if g.key]
    if not gold:  # nothing to match
        return TatQaScore(0.0, 0.0)
    in_percent = _in_percent(spans[0]) if percent is not None and len(spans) == 1 else None
    if in_percent is None:
        return _scored(prediction, answer_text, gold)
    as_percent = _scored(prediction, answer_text, [in_percent])
    if percent == "percent":
        return replace(as_percent, percent=percent)
    as_written = replace(_scored(prediction, answer_text, gold), percent=percent)
    return as_written if percent == "plain" else replace(as_written, em_if_percent=as_percent.em)


def _scored(prediction: float | None, answer_text: str | None, gold: list[_Span]) -> TatQaScore:
    if prediction is None and answer_text:
        scaled = _scaled(answer_text)
        if scaled is not None and scaled[1] == 0:  # a number without a scale word is read as a predicted number
            prediction = float(scaled[0])
    if prediction is not None and math.isfinite(prediction):
        in_percent = next((g.power == -2 for g in gold if g.number is not None), False)
        predicted = [_Span(_number_key(_predicted_number(prediction, in_percent)), None)]
    else:
        predicted = [_span(answer_text)] if answer_text and _span(answer_text).key else []
    if not predicted:
        return TatQaScore(0.0, 0.0)
    em = float(sorted(p.key for p in predicted) == sorted(g.key for g in gold))
    f1 = _aligned_f1(predicted, gold)
    error = None
    if not em and len(gold) == 1 and gold[0].number is not None and prediction is not None:
        error = _error_kind(prediction, gold[0])
    return TatQaScore(em, round(f1, 4), error)
