"""The years a text names, as the prior and page evidence read them."""

from __future__ import annotations

import re

import pytest

from t2rag.data import load_questions
from t2rag.retrieval.years import FIRST_YEAR, mask_of, year_mask, years_named


@pytest.mark.parametrize(
    ("text", "years"),
    [
        ("What was the change in revenue from 2018 to 2019?", {2018, 2019}),
        ("In the 2019's report, what was 1,999.5 million?", {2019}),
        ("FY2019 and 12019 and 2019a are not years; (2017) is", {2017}),
        ("What was the ratio in 1899 and 2100?", set()),
    ],
)  # fmt: skip
def test_the_years_a_text_names(text, years) -> None:
    assert years_named(text) == years


def test_a_mask_holds_the_years_of_its_span_only() -> None:
    assert mask_of([FIRST_YEAR, FIRST_YEAR + 2]) == 0b101
    assert mask_of([FIRST_YEAR - 1, FIRST_YEAR + 64]) == 0
    assert year_mask("from 2018 to 2019") == (1 << (2018 - FIRST_YEAR)) | (1 << (2019 - FIRST_YEAR))


def test_every_dev_question_s_years_are_its_standalone_four_digit_numbers() -> None:
    """A direct reading: each maximal run of word characters that is 19xx or 20xx."""
    for question in load_questions(None).table.column("question").to_pylist():
        direct = {int(w) for w in re.findall(r"\w+", question) if len(w) == 4 and w[:2] in ("19", "20") and w.isdigit()}
        assert years_named(question) == direct, question
