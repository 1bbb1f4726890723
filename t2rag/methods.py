"""The paper's RAG methods (Table 3) as small compositions of steps, registered by name.

Each method says how to form the retrieval query, which texts are indexed, which retriever ranks them, and which
texts the generator reads. The runners (single-process, Ray, Serve) interpret these specs; none of them hard-codes
a method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

QuerySource = Literal["question", "hyde"]
IndexTexts = Literal["context", "summary"]
ReaderInput = Literal["none", "gold", "retrieved_context", "retrieved_summary"]


@dataclass(frozen=True)
class Method:
    """One RAG method: query -> (index, retriever) -> texts the generator reads."""

    name: str
    description: str
    retriever: str | None = None  # a name from t2rag.retrieval.RETRIEVERS; None: no retrieval
    query: QuerySource = "question"
    index_texts: IndexTexts = "context"
    reads: ReaderInput = "retrieved_context"

    @property
    def retrieves(self) -> bool:
        return self.retriever is not None

    @property
    def retrieval_needs_generator(self) -> bool:
        """HyDE writes the query and summary methods index generated summaries."""
        return self.query == "hyde" or self.index_texts == "summary"


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("pretrained_only", "the question alone, no context", reads="none"),
        Method("oracle", "the question with its own gold context", reads="gold"),
        Method("base", "dense top-k (Base-RAG)", retriever="base"),
        Method("bm25", "BM25 top-k", retriever="bm25"),
        Method(
            "hybrid_bm25",
            "dense top-k fused with normalised BM25 (the paper's Hybrid BM25)",
            retriever="hybrid_bm25",
        ),
        Method("hybrid_rrf", "reciprocal-rank fusion of dense and BM25", retriever="hybrid_rrf"),
        Method("reranker", "cross-encoder over a 3k dense pool", retriever="reranker"),
        Method(
            "hyde",
            "dense search with the embedding of a generated hypothetical document",
            retriever="base",
            query="hyde",
        ),
        Method(
            "summarization",
            "index and read generated summaries of every context",
            retriever="base",
            index_texts="summary",
            reads="retrieved_summary",
        ),
        Method(
            "sumcontext",
            "retrieve over summaries, read the original contexts",
            retriever="base",
            index_texts="summary",
            reads="retrieved_context",
        ),
    ]
}

#: The paper's Table 3 order.
PAPER_METHODS: tuple[str, ...] = (
    "pretrained_only",
    "oracle",
    "base",
    "hybrid_bm25",
    "reranker",
    "hyde",
    "summarization",
    "sumcontext",
)
RETRIEVAL_METHODS: tuple[str, ...] = tuple(name for name, m in METHODS.items() if m.retrieves)


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method '{name}' (choose from {', '.join(METHODS)})") from None
