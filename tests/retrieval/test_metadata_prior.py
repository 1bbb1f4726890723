"""The metadata linker on real name variants of the bundled sample, and its degradation without metadata."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data import build_corpora, load_questions
from t2rag.data.corpus import Corpus
from t2rag.retrieval.config import RetrievalConfig, build_retriever
from t2rag.retrieval.metadata_prior import MetadataPrior, name_tokens


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
