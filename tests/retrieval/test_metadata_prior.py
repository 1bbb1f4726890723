"""The metadata linker on real name variants of the bundled sample, and its degradation without metadata."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data import build_corpora, load_questions
from t2rag.data.corpus import Corpus
from t2rag.retrieval.config import RetrievalConfig, build_retriever
from t2rag.retrieval.metadata_prior import (
    _REPORT_YEAR,
    DocumentMetadata,
    MetadataPrior,
    name_tokens,
    named_report_years,
)
from t2rag.retrieval.years import years_named
from t2rag.tokenize import numeric_tokenize


@pytest.fixture(scope="module")
def corpora() -> dict[str, Corpus]:
    return build_corpora(load_questions(None))


def _linked(prior: MetadataPrior, corpus: Corpus, question: str) -> set[str]:
    """Company names of the documents the question matches fully."""
    company = prior.features([question])["company"][0]
    names = corpus.metadata["company_name"]
    return {names[i] for i in np.flatnonzero(company == 1.0)}


def test_name_normalisation() -> None:
    assert name_tokens("spirent-communications-plc") == ["spirent", "communications"]
    assert name_tokens("Interpublic Group of Companies (The)") == ["interpublic"]
    assert name_tokens("Snap-on") == ["snap"]
    assert name_tokens("Woolworths-Limited") == ["woolworths"]


@pytest.mark.parametrize(
    ("subset", "question", "company"),
    [
        ("FinQA", "What was the cumulative total return for Citi's common stock over five years?", "Citigroup"),
        ("FinQA", "What was the change in the liability at The Interpublic Group from 2006?", None),
        ("TAT-DQA", "What is the change in order intake for Spirent Communications Plc in 2019?", None),
        ("TAT-DQA", "What were the exchange gains reported by Tencent Group in 2019?", "tencent"),
        ("FinQA", "By how much did AAPL's gross margin change in 2003?", "Apple Inc."),
    ],
)
def test_real_name_variants_link_to_their_company(corpora, subset, question, company) -> None:
    corpus = corpora[subset]
    names = set(corpus.metadata["company_name"])
    expected = company or next(n for n in names if name_tokens(n)[0] in question.lower())
    assert _linked(MetadataPrior(corpus), corpus, question) == {expected}


def test_a_company_inside_another_report_is_a_soft_prior(corpora) -> None:
    """finqa_dev_0 asks about American Express inside Visa's 10-K: the prior points elsewhere, yet fused retrieval
    still ranks the Visa context first, since no document is filtered out."""
    corpus = corpora["FinQA"]
    question = (
        "What was the average payment volume per transaction for American Express in 2007, based on its reported "
        "payments volume and total number of transactions?"
    )
    assert "Visa Inc." not in _linked(MetadataPrior(corpus), corpus, question)
    retriever = build_retriever("bm25_meta", RetrievalConfig())
    retriever.index(corpus)
    top = retriever.search([question], k=3).context_ids(corpus)[0]
    assert top[0] == "finqa_dev_ctx_138"


def test_years_match_the_report_and_the_year_before(corpora) -> None:
    corpus = corpora["FinQA"]
    years = np.array([int(y) for y in corpus.metadata["report_year"]])
    features = MetadataPrior(corpus).features(["What changed between 2007 and 2008?"])
    assert set(years[features["year"][0] == 1]) == {2007, 2008}
    assert set(years[features["year_before"][0] == 1]) == {2008, 2009}


def test_without_metadata_fusion_is_the_lexical_ranking(corpora) -> None:
    full = corpora["TAT-DQA"]
    bare = Corpus(full.name, full.context_ids, full.subsets, full.texts)
    assert MetadataPrior(bare).empty
    questions = load_questions(None).subset("TAT-DQA").table.column("question").to_pylist()[:200]
    meta, plain = build_retriever("bm25_meta"), build_retriever("bm25_numeric")
    meta.index(bare)
    plain.index(bare)
    np.testing.assert_array_equal(meta.search(questions, 3).indices, plain.search(questions, 3).indices)


def test_matching_is_vectorised_over_documents(corpora) -> None:
    """Features of many questions at once equal those of each question alone."""
    corpus = corpora["FinQA"]
    prior = MetadataPrior(corpus)
    questions = load_questions(None).subset("FinQA").table.column("question").to_pylist()[:50]
    together = prior.features(questions)
    for i in (0, 17, 49):
        alone = prior.features([questions[i]])
        for name, values in together.items():
            np.testing.assert_array_equal(values[i], alone[name][0])


@pytest.mark.parametrize(
    ("question", "years"),
    [
        ("In the 2019 financial report of Spirent Communications PLC, which year had a higher gross margin?", {2019}),
        ("What was the ratio of hedged gallons in the fuel hedges table of Republic Services' 2015 consolidated "
         "financial statements?", {2015}),
        ("What was the increase in commitments from 2017 to 2018, as reported in the 2013 Form 10-K?", {2013}),
        ("What did the annual report for fiscal year 2012 say about backlog?", {2012}),
        ("What was the change in revenue from 2018 to 2019?", set()),
    ],
)  # fmt: skip
def test_the_year_a_question_names_as_its_reports(question, years) -> None:
    assert named_report_years(question) == years


def test_the_report_words_shortcut_changes_no_question_s_years() -> None:
    """A question without the words the pattern needs is not searched: on every dev question, and on ones in
    other cases and scripts, the years are those the full pattern finds."""
    questions = load_questions(None).table.column("question").to_pylist()
    questions += ["What did the 2019 ANNUAL REPORT say?", "Was the 2013 Form 10-K late?", "Le rapport 2019 ſtatements"]
    for question in questions:
        assert named_report_years(question) == {int(a or b) for a, b in _REPORT_YEAR.findall(question)}, question


def test_the_years_read_once_give_the_features_read_alone(corpora) -> None:
    """The fused retriever reads a question's years once for the prior and page evidence: the prior's features
    are the same given them."""
    prior = MetadataPrior(corpora["TAT-DQA"])
    questions = load_questions(None).subset("TAT-DQA").scored().column("question").to_pylist()
    alone, given = prior.features(questions), prior.features(questions, years=[years_named(q) for q in questions])
    assert alone.keys() == given.keys()
    for name in alone:
        np.testing.assert_array_equal(alone[name], given[name])


def test_report_named_is_the_report_year_the_question_names(corpora) -> None:
    """On every real FinQA dev question: the feature is 1 exactly for the contexts of the named years' reports, and
    where a question names one, it is its gold context's report year almost always."""
    corpus = corpora["FinQA"]
    years = np.array([int(y) for y in corpus.metadata["report_year"]])
    rows = load_questions(None).subset("FinQA").scored()
    questions, gold = rows.column("question").to_pylist(), rows.column("context_id").to_pylist()
    named = MetadataPrior(corpus).features(questions)["report_named"]
    hits = right = 0
    for q, (question, context) in enumerate(zip(questions, gold, strict=True)):
        expected = np.isin(years, list(named_report_years(question)))
        np.testing.assert_array_equal(named[q] == 1, expected)
        if expected.any():
            hits += 1
            right += bool(named[q, corpus.positions[context]])
    assert hits > 200 and right / hits > 0.95


@pytest.mark.parametrize(
    ("subset", "question", "left"),
    [
        ("TAT-DQA", "What is the percentage change in order intake for Spirent Communications Plc between 2018 and "
         "2019?", "what is the percentage change in order intake for between 2018 and 2019"),
        ("FinQA", "What was the cumulative total return for Citi's common stock over five years?",
         "what was the cumulative total return for s common stock over five years"),
        ("FinQA", "By how much did AAPL's gross margin change in 2003?",
         "by how much did s gross margin change in 2003"),
        # a company the corpus does not hold, and a question naming none, keep every word
        ("FinQA", "What was the average payment volume for American Express in 2007?",
         "what was the average payment volume for american express in 2007"),
        ("TAT-DQA", "What was the change in Total operating income from fiscal 2018 to fiscal 2019?",
         "what was the change in total operating income from fiscal 2018 to fiscal 2019"),
    ],
)  # fmt: skip
def test_the_words_naming_the_questions_company_are_left_out(corpora, subset, question, left) -> None:
    """BM25 reads what is left of the question's numeric tokens: the name's words, prefixes ("citi") and ticker go."""
    (words,) = MetadataPrior(corpora[subset]).company_words([question])
    assert " ".join(t for t in numeric_tokenize(question) if t not in words) == left


def test_a_10_k_alone_names_the_report_year() -> None:
    """ "10-K" is one of the words a report year is named by, as the pattern's own example says ("2013 Form 10-K"):
    a question that says only "10-K" (no "report", "statements", "filing" or "form") still names its year."""
    assert named_report_years("What was Deere's net income in the fiscal 2019 10-K?") == {2019}
    assert named_report_years("What does the 10-K for fiscal year 2012 say about backlog?") == {2012}


def test_only_the_best_matched_company_has_its_words_left_out() -> None:
    """A question naming one company whole (match 1.0) and another nearly (0.865, above NAMED_MATCH): only the best
    one's words go. Weights by hand: ten names, "global" in nine (idf log(1 + 10/9) = 0.747), "bolt" and
    "fasteners" in one each (log(1 + 10) = 2.398), so "Bolt Fasteners" without "Global" matches 4.796 / 5.543."""
    others = [f"{w} Global" for w in ("Carbon", "Delta", "Echo", "Falcon", "Granite", "Harbor", "Indigo", "Juniper")]
    names = ("Acme Widgets", "Bolt Fasteners Global", *others)
    prior = MetadataPrior.of(DocumentMetadata(names, (None,) * len(names), ("2019",) * len(names)))
    question = "How did Acme Widgets' sales compare with Bolt Fasteners' in 2019?"
    match = dict(zip(sorted(names), prior.entity_match([question])[0].tolist(), strict=True))
    assert match["Acme Widgets"] == 1.0 and match["Bolt Fasteners Global"] == pytest.approx(0.865, abs=1e-3)
    (words,) = prior.company_words([question])
    assert {"acme", "widgets"} <= words and not {"bolt", "fasteners", "global"} & words
