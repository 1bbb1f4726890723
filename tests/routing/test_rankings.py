"""Routers' rankings and their scores, against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from t2rag.routing.rankings import llm_ranking, oracle_ranking, routing_scores, searched_corpus, semantic_rankings

LOADED = ["FinQA", "ConvFinQA", "TAT-DQA"]


@pytest.mark.parametrize(
    ("ranking", "subset", "accuracy", "ndcg"),
    [
        (["TAT-DQA", "FinQA"], "TAT-DQA", True, 1.0),
        (["FinQA", "TAT-DQA"], "TAT-DQA", False, 1 / math.log2(3)),  # rank 2: 0.6309
        (["FinQA", "ConvFinQA", "TAT-DQA"], "TAT-DQA", False, 0.5),  # rank 3: 1 / log2(4)
        (["A", "B", "C", "TAT-DQA"], "TAT-DQA", False, 0.0),  # beyond the cut-off of 3
        (["FinQA"], "TAT-DQA", False, 0.0),
    ],
)
def test_routing_accuracy_and_ndcg_at_3(ranking, subset, accuracy, ndcg):
    assert routing_scores(ranking, subset) == (accuracy, pytest.approx(ndcg))


def test_the_oracle_puts_the_questions_subset_first():
    assert oracle_ranking("TAT-DQA", LOADED) == ["TAT-DQA", "FinQA", "ConvFinQA"]


def test_the_semantic_router_ranks_by_cosine_similarity():
    descriptions = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    questions = np.array([[3.0, 0.1], [0.2, 2.0], [1.0, 0.9]])
    # cosines: q1 (0.9994, 0.0333, 0.7306); q2 (0.0995, 0.9950, 0.7740); q3 (0.7433, 0.6690, 0.9986)
    assert semantic_rankings(questions, descriptions, LOADED) == [
        ["FinQA", "TAT-DQA", "ConvFinQA"],
        ["ConvFinQA", "TAT-DQA", "FinQA"],
        ["TAT-DQA", "FinQA", "ConvFinQA"],
    ]


@pytest.mark.parametrize(
    ("reply", "ranking", "named"),
    [
        ('{"ranking": ["TAT-DQA", "FinQA", "ConvFinQA"]}', ["TAT-DQA", "FinQA", "ConvFinQA"], True),
        ('{"ranking": ["tat-dqa"]}', ["TAT-DQA", "FinQA", "ConvFinQA"], True),  # the rest after it, in load order
        ('{"Ranking": ["nothing", "ConvFinQA"]}', ["ConvFinQA", "FinQA", "TAT-DQA"], True),
        ("Most likely TAT-DQA, then FinQA.", ["TAT-DQA", "FinQA", "ConvFinQA"], True),  # names in prose
        ("I do not know.", LOADED, False),
        (None, LOADED, False),
    ],
)
def test_the_llm_routers_reply_is_read(reply, ranking, named):
    assert llm_ranking(reply, LOADED) == (ranking, named)


def test_the_searched_corpus_is_the_top_subset_their_union_or_everything():
    assert searched_corpus(["TAT-DQA", "FinQA", "ConvFinQA"], 1, LOADED) == "TAT-DQA"
    assert searched_corpus(["TAT-DQA", "FinQA", "ConvFinQA"], 2, LOADED) == "FinQA+TAT-DQA"
    assert searched_corpus(["TAT-DQA", "FinQA", "ConvFinQA"], 3, LOADED) == "pooled"
    assert searched_corpus(["TAT-DQA", "FinQA"], 2, ["FinQA", "TAT-DQA"]) == "pooled"


@pytest.mark.parametrize(
    ("reply", "ranking"),
    [
        # the JSON's ranking wins over the order the prose names them in
        ('FinQA looks close, but {"ranking": ["TAT-DQA", "FinQA"]}', ["TAT-DQA", "FinQA", "ConvFinQA"]),
        ('{"RANKING": [" ConvFinQA "]} and FinQA', ["ConvFinQA", "FinQA", "TAT-DQA"]),  # any case, spaces trimmed
        ("FinQA, then TAT-DQA.", ["FinQA", "TAT-DQA", "ConvFinQA"]),  # a name at the reply's first character
        ("FinQA or TAT-DQA; FinQA most likely", ["FinQA", "TAT-DQA", "ConvFinQA"]),  # each where first named
        ('{"ranking": []} TAT-DQA', ["TAT-DQA", "FinQA", "ConvFinQA"]),  # an empty ranking: the prose
        ('{"answer": "TAT-DQA"} or FinQA', ["TAT-DQA", "FinQA", "ConvFinQA"]),  # no ranking key: the prose
        ("ConvFinQA, surely", ["ConvFinQA", "FinQA", "TAT-DQA"]),  # naming ConvFinQA does not name FinQA
    ],
)
def test_the_llm_routers_json_and_prose(reply, ranking):
    assert llm_ranking(reply, LOADED) == (ranking, True)


def test_the_union_of_subsets_is_named_in_load_order():
    assert searched_corpus(["FinQA", "ConvFinQA", "TAT-DQA"], 2, LOADED) == "FinQA+ConvFinQA"  # not alphabetical
    assert searched_corpus(["TAT-DQA", "ConvFinQA"], 2, LOADED) == "ConvFinQA+TAT-DQA"


def test_descriptions_shorter_than_one_are_normalised_too():
    """Cosines, not dot products: descriptions of lengths 0.1 and 0.5 along the two axes score a question
    (1, 0.5) at 0.894 and 0.447 by cosine, where dot products (0.1, 0.25) would put the second first."""
    descriptions = np.array([[0.1, 0.0], [0.0, 0.5], [0.0, 0.0]])
    assert semantic_rankings(np.array([[1.0, 0.5]]), descriptions, LOADED) == [["FinQA", "ConvFinQA", "TAT-DQA"]]


def test_the_llm_routers_prose_is_read_in_any_case():
    assert llm_ranking("probably tat-dqa", LOADED) == (["TAT-DQA", "FinQA", "ConvFinQA"], True)


def test_ties_keep_the_load_order_however_many_subsets():
    """Forty subsets described in three directions, (1, 0), (0, 1) and (1, 1) in turn: a question (1, 0) scores
    them 1, 0 and 0.7071, so it ranks every third from the first, then every third from the third, then the rest,
    each group in load order."""
    loaded = [f"S{i}" for i in range(40)]
    descriptions = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]] * 14)[:40]
    expected = [loaded[i] for r in (0, 2, 1) for i in range(40) if i % 3 == r]
    assert semantic_rankings(np.array([[1.0, 0.0]]), descriptions, loaded) == [expected]
