"""Loading, validating and indexing-ready views of T2-RAGBench."""

from t2rag.data.corpus import POOLED, Corpus, build_corpora, build_corpus, subset_stats
from t2rag.data.load import QuestionSet, load_questions
from t2rag.data.source import HUB_DATASET, DataSource, resolve_source

__all__ = [
    "HUB_DATASET",
    "POOLED",
    "Corpus",
    "DataSource",
    "QuestionSet",
    "build_corpora",
    "build_corpus",
    "load_questions",
    "resolve_source",
    "subset_stats",
]
