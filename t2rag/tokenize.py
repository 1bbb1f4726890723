"""Tokenizers for sparse retrieval.

`whitespace` is the paper authors' tokenization and the default: lowercase, then split on whitespace. `numeric`
(the `bm25_numeric` method and the fused retrievers) is numeric- and table-aware: punctuation and table rules split
words ("|revenue|" -> "revenue", "u.s." -> "u", "s"), numbers stay whole without thousands separators
("$1,234.5" -> "1234.5", years too), and a percent sign is a term of its own ("13.2%" -> "13.2", "%").
"""

from __future__ import annotations

import re
from collections.abc import Callable

Tokenizer = Callable[[str], list[str]]

_NUMBER_OR_WORD = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+|%", re.UNICODE)


def whitespace_tokenize(text: str) -> list[str]:
    """Lowercase and split on runs of whitespace."""
    return text.lower().split()


def numeric_tokenize(text: str) -> list[str]:
    """Lowercase words, whole numbers with thousands separators removed, and percent signs."""
    return [tok.replace(",", "") for tok in _NUMBER_OR_WORD.findall(text.lower())]


TOKENIZERS: dict[str, Tokenizer] = {"whitespace": whitespace_tokenize, "numeric": numeric_tokenize}


def get_tokenizer(name: str) -> Tokenizer:
    try:
        return TOKENIZERS[name]
    except KeyError:
        raise ValueError(f"unknown tokenizer '{name}' (choose from {sorted(TOKENIZERS)})") from None
