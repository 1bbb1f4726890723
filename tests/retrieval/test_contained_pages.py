"""Pages of one report that another holds whole, found as a direct count finds them, and the ranking rule that moves
such a page above its holder only when the holder adds none of the question's page evidence: on real dev rows."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from t2rag.data import build_corpora, load_questions
from t2rag.retrieval.config import RetrievalConfig, build_retriever
from t2rag.retrieval.contained_pages import CONTAINED, RUN, ContainedPages

#: A TAT-DQA dev question whose gold page (Advanced Energy's statement of operations) is the first part of a longer
#: page of the same report (the same table, then the percentage-of-sales and product-line tables).
GROSS_PROFIT = "What was Advanced Energy's gross profit for the year ended December 31, 2018?"


@pytest.fixture(scope="module")
def tat_dqa():
    questions = load_questions(None)
    return questions.subset("TAT-DQA"), build_corpora(questions)["TAT-DQA"]


def _runs(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[i : i + RUN]) for i in range(len(words) - RUN + 1)}


def test_holders_are_the_pages_of_a_report_that_hold_another_by_a_direct_count(tat_dqa) -> None:
    _, corpus = tat_dqa
    names, years = corpus.metadata_column("company_name"), corpus.metadata_column("report_year")
    contained = ContainedPages.of(corpus.texts, names, years)
    runs = [_runs(t) for t in corpus.texts]
    expected = set()
    for a, b in itertools.combinations(range(len(corpus)), 2):
        if (names[a], years[a]) != (names[b], years[b]):
            continue
        shared = len(runs[a] & runs[b])
        a_in_b, b_in_a = shared >= CONTAINED * len(runs[a]), shared >= CONTAINED * len(runs[b])
        if a_in_b != b_in_a:
            expected.add((b, a) if a_in_b else (a, b))
    assert len(expected) >= 2
    found = {(h, d) for h in range(len(corpus)) for d in range(len(corpus)) if contained.holds(h, d)}
    assert found == expected


def test_a_held_page_moves_above_its_holder_only_when_the_holder_adds_no_evidence(tat_dqa) -> None:
    rows, corpus = tat_dqa
    asked = rows.table.column("question").to_pylist()
    gold = corpus.positions[rows.table.column("context_id").to_pylist()[asked.index(GROSS_PROFIT)]]
    retriever = build_retriever("bm25_focus", RetrievalConfig())
    retriever.index(corpus)
    holder = next(h for h in range(len(corpus)) if retriever.contained.holds(h, gold))
    product_line = "What were Advanced Energy's 2019 sales of the Semiconductor Equipment product line?"
    with_rule = retriever.search([GROSS_PROFIT, product_line], 3).indices[:, :2]
    assert with_rule[0].tolist() == [gold, holder]
    assert with_rule[1, 0] == holder  # only the holder has that line item: it keeps its place
    contained, retriever.contained = retriever.contained, None
    without = retriever.search([GROSS_PROFIT], 3).indices[0, :2]
    retriever.contained = contained
    assert without.tolist() == [holder, gold]  # BM25 alone favours the page that prints the table twice


def test_a_held_page_takes_its_holders_score_so_scores_stay_in_order() -> None:
    contained = ContainedPages(np.array([[7, 3]]))  # page 7 holds page 3
    positions, scores = np.array([[7, 3, 5], [7, 5, 3]]), np.array([[2.0, 1.5, 1.0], [2.0, 1.8, 1.5]])
    evidence = lambda row: np.zeros((2, 3))  # noqa: E731  # the holder adds no evidence
    moved, raised = contained.prefer_held(positions, scores, evidence)
    assert moved.tolist() == [[3, 7, 5], [3, 7, 5]]
    assert raised.tolist() == [[2.0, 2.0, 1.0], [2.0, 2.0, 1.8]]
    more = lambda row: np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # noqa: E731  # the holder has more
    kept, _ = contained.prefer_held(positions, scores, more)
    assert kept.tolist() == positions.tolist()
