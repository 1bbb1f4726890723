"""Whether a question asks for a percentage: the scale TAT-DQA's release dropped from its golds.

TAT-QA keeps each answer's scale beside it (`scale`: "", thousand, million, billion or percent), so its EM reads a
gold "60" asked as a percentage as 60%, and a predicted fraction 0.6 matches it. The hub's TAT-DQA release has no
scale column: most golds are bare numbers ("13.2" for "What is the percentage change in order intake ...").
`percent_reading` recovers the percent scale from the question's own words, so EM and F1 score such a gold as
TAT-QA does. It reads the question's text and nothing else of the row.

The rule, in order (the first that applies decides):

1. **plain** when the question asks for a year, a date, a period or a count: "which year", "what year", "when"
   opening the question, "on what date", "how many" (TAT-DQA asks "which year showed a higher gross margin
   (%)?" and answers "2019").
2. **percent** when it names a percentage: "percent", "percentage" (and "percentage point"), "per cent", or a "%"
   that does not follow a figure ("gross margin (%)", "the % change"; "5.125% Senior Notes" quotes a rate, it does
   not ask for one).
3. **plain** when it asks for a "ratio" (TAT-DQA's ratios are bare numbers: 18.34, 0.97).
4. **undecided** when it names a quantity that TAT-DQA answers sometimes as a percentage and sometimes as a plain
   number or a fraction: "proportion" (0.45 and "49%" both occur), "rate" (a discount rate of 2.9%, an exchange
   rate of 0.87), "margin" (a gross margin of 8,574 or of 49%), "yield", "growth", "share of". Amounts that only
   contain such a word are not cues: "per share", "exchange rate", "interest rate swap".
5. **plain** otherwise.

`t2rag.metrics.tatqa` applies the reading only to a gold that is one number written without a scale of its own, in
a subset whose release dropped the scale (`SCALE_DROPPED`). An undecided gold is scored as written, and its EM read
as a percentage is kept beside it (`em_if_percent`), so a report can show both.
"""

from __future__ import annotations

import re
from typing import Literal

#: The subsets whose release dropped the source's scale column: their bare-number golds get `percent_reading`.
SCALE_DROPPED = frozenset({"TAT-DQA"})

PercentReading = Literal["percent", "plain", "undecided"]
#: The readings, in the order the rule's steps can reach them.
READINGS: tuple[PercentReading, ...] = ("percent", "plain", "undecided")

_ASKS_WHEN_OR_COUNT = re.compile(
    r"\b(?:which|what)\s+(?:(?:fiscal|financial|calendar)\s+)?(?:years?|dates?|quarters?|months?|periods?)\b"
    r"|^\W*(?:(?:in|on|by|until)\s+)?when\b|\bhow\s+many\b",
    re.IGNORECASE,
)
_NAMES_PERCENT = re.compile(r"\bpercent(?:age)?s?\b|\bper\s+cent\b|(?<![0-9%])(?<![0-9]\s)%", re.IGNORECASE)
_ASKS_RATIO = re.compile(r"\bratios?\b", re.IGNORECASE)
_NOT_A_CUE = re.compile(
    r"\bper\s+(?:common\s+)?share\b|\bexchange\s+rates?\b|\binterest\s+rate\s+swaps?\b|\brate\s+swaps?\b",
    re.IGNORECASE,
)
_MAYBE_PERCENT = re.compile(r"\b(?:proportions?|rates?|margins?|yields?|growth|share\s+of)\b", re.IGNORECASE)


def percent_reading(question: str | None) -> PercentReading:
    """Whether the question asks for a percentage (`percent`), does not (`plain`), or cannot be told from its
    words (`undecided`); see the module's rule."""
    if not question or _ASKS_WHEN_OR_COUNT.search(question):
        return "plain"
    if _NAMES_PERCENT.search(question):
        return "percent"
    if _ASKS_RATIO.search(question):
        return "plain"
    if _MAYBE_PERCENT.search(_NOT_A_CUE.sub(" ", question)):
        return "undecided"
    return "plain"
