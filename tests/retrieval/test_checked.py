"""The check every block of a plugin's retriever passes: the promised shape, positions in the corpus, no NaN score
beside a position (NaN beside a -1 pad is how a short row ends)."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data.corpus import build_corpus
from t2rag.errors import PluginError
from t2rag.retrieval import Hits, build_retriever
from t2rag.retrieval.checked import CheckedRetriever, hits_problem


def _hits(indices, scores) -> Hits:
    return Hits(np.asarray(indices, np.int64), np.asarray(scores, np.float64))


def test_a_well_formed_block_passes_and_short_rows_end_in_pads():
    assert hits_problem(_hits([[2, 0, -1]], [[1.0, 0.5, np.nan]]), queries=1, depth=3, n_docs=3) is None


@pytest.mark.parametrize(
    ("hits", "problem"),
    [
        (_hits([[0, 1]], [[1.0, 0.5]]), "indices of shape (1, 2) and scores of shape (1, 2) for 1 queries at depth 3"),
        (_hits([[0, 1, 3]], [[1.0, 0.5, 0.1]]), "position 3, outside the corpus of 3 contexts"),
        (_hits([[0, -2, 1]], [[1.0, 0.5, 0.1]]), "position -2, outside the corpus of 3 contexts"),
        (_hits([[0, 1, 2]], [[1.0, np.nan, 0.1]]), "a NaN score for a ranked context"),
        ([[0, 1, 2]], "a list, not Hits"),
        (Hits(np.zeros((1, 3)), np.zeros((1, 3))), "indices of type float64, not integers"),
    ],
)
def test_each_broken_block_is_named(hits, problem):
    assert hits_problem(hits, queries=1, depth=3, n_docs=3).startswith(problem)


def test_the_wrapper_names_the_plugin_and_passes_good_blocks_through(sample):
    corpus = build_corpus(sample, "FinQA")
    checked = CheckedRetriever(build_retriever("bm25"), "mine", "my-package 1.0")
    checked.index(corpus)
    hits = checked.search(["What was the net revenue in 2019?"], k=3)
    assert hits.indices.shape == (1, 10) and checked.corpus is corpus
    with pytest.raises(PluginError, match=r"^plugin my-package 1.0: retriever 'mine' built a str, not a"):
        CheckedRetriever("not a retriever", "mine", "my-package 1.0")  # type: ignore[arg-type]
