"""Routers' rankings of the loaded subsets, and how a ranking is scored.

A question's own subset is the one relevant corpus (binary relevance). Routing accuracy: the top-ranked subset is
the question's own. NDCG@3: 1 / log2(1 + r) where r is the rank of the question's subset, 0 beyond rank 3 (the ideal
ranking puts it first, so the ideal DCG is 1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from t2rag.answer.extract import decode_objects
from t2rag.data.corpus import POOLED

NDCG_CUTOFF = 3


def routing_scores(ranking: Sequence[str], subset: str) -> tuple[bool, float]:
    """(routing accuracy, NDCG@3) of one ranking of subsets for a question of `subset`."""
    if subset not in ranking:
        return False, 0.0
    rank = list(ranking).index(subset) + 1
    return rank == 1, (1.0 / math.log2(1 + rank) if rank <= NDCG_CUTOFF else 0.0)


def oracle_ranking(subset: str, loaded: Sequence[str]) -> list[str]:
    """The question's own subset first, then the others in load order."""
    return [subset, *(s for s in loaded if s != subset)]


def semantic_rankings(questions: np.ndarray, descriptions: np.ndarray, loaded: Sequence[str]) -> list[list[str]]:
    """Subsets ranked by the cosine similarity of each question's vector with each description's (ties: load
    order). A question's own length scales its row of similarities alike, so only the descriptions are normalised."""
    d = descriptions / np.maximum(np.linalg.norm(descriptions, axis=1, keepdims=True), 1e-12)
    similarity = questions @ d.T
    order = np.argsort(-similarity, axis=1, kind="stable")
    return [[loaded[j] for j in row] for row in order.tolist()]


def llm_ranking(text: str | None, loaded: Sequence[str]) -> tuple[list[str], bool]:
    """The subsets a generator's reply ranks (`{"ranking": [...]}`, else the subsets' names in the order the text
    names them), the ones it leaves out after them in load order; and whether the reply named any."""
    if not text:
        return list(loaded), False
    named = list(dict.fromkeys(_json_ranking(text, loaded) or _named_in_prose(text, loaded)))
    return named + [s for s in loaded if s not in named], bool(named)


def _json_ranking(text: str, loaded: Sequence[str]) -> list[str]:
    """The loaded subsets the reply's last object with a `ranking` list names, in its order (any case)."""
    lowered = {s.lower(): s for s in loaded}
    for obj in reversed(decode_objects(text)):
        items = next((v for k, v in obj.items() if str(k).lower() == "ranking"), None)
        if isinstance(items, list):
            return [lowered[str(i).strip().lower()] for i in items if str(i).strip().lower() in lowered]
    return []


def _named_in_prose(text: str, loaded: Sequence[str]) -> list[str]:
    """The loaded subsets the text names as words of their own (any case; "ConvFinQA" does not name FinQA), in the
    order it first names them."""
    found = {s: re.search(rf"(?<![a-z0-9]){re.escape(s)}(?![a-z0-9])", text, re.IGNORECASE) for s in loaded}
    return sorted((s for s, m in found.items() if m), key=lambda s: found[s].start())


def searched_corpus(ranking: Sequence[str], top: int, loaded: Sequence[str]) -> str:
    """The corpus a routed question searches: its top subset, the union of its top `top` ("A+B"), or the pooled
    corpus when that takes every loaded subset."""
    chosen = list(ranking[:top])
    if len(chosen) >= len(loaded):
        return POOLED
    return "+".join(sorted(chosen, key=list(loaded).index))
