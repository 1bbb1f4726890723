"""Retrievers over a corpus of contexts: BM25, dense (LanceDB), hybrid fusions and cross-encoder reranking."""

from t2rag.retrieval.base import MIN_DEPTH, Hits, QueryBlock, Retriever
from t2rag.retrieval.config import RETRIEVERS, BM25Config, HybridConfig, RetrievalConfig, build_retriever
from t2rag.retrieval.embedder import Embedder, EmbedderConfig
from t2rag.retrieval.reranker import RerankerConfig

__all__ = [
    "MIN_DEPTH",
    "RETRIEVERS",
    "BM25Config",
    "Embedder",
    "EmbedderConfig",
    "Hits",
    "HybridConfig",
    "QueryBlock",
    "RerankerConfig",
    "RetrievalConfig",
    "Retriever",
    "build_retriever",
]
