"""The words and figures page evidence reads of a text: content words (stop words dropped), plurals folded, adjacent
pairs and runs of three, and the figures it states."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from functools import lru_cache

from t2rag.retrieval.years import YEAR

WORD = re.compile(r"[a-z][a-z]+")


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")


#: Words that name no line item: question words, and the measures every financial table has.
# fmt: off
STOP_WORDS = frozenset({
    "the", "a", "an", "of", "in", "on", "for", "to", "and", "or", "by", "with", "from", "at", "as", "is", "are", "was",
    "were", "what", "which", "how", "much", "many", "did", "does", "do", "be", "been", "this", "that", "these",
    "those", "its", "it", "their", "total", "change", "percentage", "percent", "year", "years", "ratio", "average",
    "value", "amount", "between", "during",
})
# fmt: on


def content_words(text: str) -> list[str]:
    """Lowercased words of two letters or more, stop words dropped, in order."""
    return [w for w in WORD.findall(text.lower()) if w not in STOP_WORDS]


def figures(text: str) -> set[str]:
    """The numbers a text states (thousands separators dropped), years excepted."""
    return {n for n in NUMBER.findall(text.replace(",", "")) if not YEAR.fullmatch(n)}


def word_pairs(words: Sequence[str]) -> set[tuple[str, str]]:
    """A text's adjacent word pairs (of its content words, in order)."""
    return set(itertools.pairwise(words))


def word_triples(words: Sequence[str]) -> set[tuple[str, str, str]]:
    """A text's runs of three adjacent content words."""
    return set(zip(words, words[1:], words[2:], strict=False))


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A plural folded to its singular ("fees" -> "fee", "liabilities" -> "liability"), other words as they are:
    a question asks about "the servicing fee" where its page prints "servicing fees"."""
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def phrase_words(text: str) -> list[str]:
    """The content words word pairs and triples are made of: stemmed, in order."""
    return [stem(w) for w in content_words(text)]
