"""A reranking stage: each question's first candidates reordered by the cosine of its TF-IDF vector with theirs,
the vectorizer fitted on those candidates alone, so a word that every candidate page prints (the company's name,
the table's headings) weighs little and the words that tell the pages apart weigh most."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from sklearn.feature_extraction.text import TfidfVectorizer

from t2rag.extend import RerankStage


class TfidfRerankSettings(BaseModel):
    """The `settings: {tfidf_rerank: {...}}` block of a run config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weight: float = Field(1.0, ge=0)  # the cosine's weight against the retrieval's order (1 / (1 + rank))
    sublinear_tf: bool = True


class TfidfRerank(RerankStage):
    """The retrieval's order (1 / (1 + rank)) plus `weight` x the TF-IDF cosine of question and candidate."""

    name = "tfidf_rerank"
    settings = TfidfRerankSettings
    candidates = 10

    def score(self, questions: list[str], texts: list[list[str]]) -> list[list[float]]:
        s = self.own_settings()
        return [rerank_scores(q, pages, s) for q, pages in zip(questions, texts, strict=True)]


def rerank_scores(question: str, pages: list[str], settings: TfidfRerankSettings) -> list[float]:
    """One question's candidates, best first as ranked: each one's order score plus weight x its TF-IDF cosine with
    the question, the vectorizer fitted on these pages."""
    if not pages:
        return []
    vectors = TfidfVectorizer(sublinear_tf=settings.sublinear_tf).fit(pages)
    cosine = (vectors.transform(pages) @ vectors.transform([question]).T).toarray().ravel()
    order = 1.0 / (1.0 + np.arange(len(pages)))
    return (order + settings.weight * cosine).tolist()
