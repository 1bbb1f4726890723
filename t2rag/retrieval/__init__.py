"""Retrievers over a corpus of contexts, in rooms by job:

- `lexical/`: BM25 (`bm25_matrix`, exact to rank_bm25) and its retriever;
- `dense/`: embedders, their tokenizers and token batches, chunking, the LanceDB vector store and the dense retrievers;
- `page_evidence/`: what a page's tables and text name (`tables`, `words`, `keys`), scored against a question
  (`features`);
- `fusion/`: rank fusion (`rank_fusion`, `hybrid`), the weighted fusion of scores with the metadata prior and page
  evidence (`weighted`), its sharded form (`sharded`) and the fit of its weights (`fit`);
- here: the retriever interface (`base`), settings and the registry (`config`), the metadata prior, years, held
  pages, ranking, shards and the cross-encoder reranker.
"""

from t2rag.retrieval.base import MIN_DEPTH, Hits, QueryBlock, Retriever
from t2rag.retrieval.config import RETRIEVERS, BM25Config, HybridConfig, RetrievalConfig, build_retriever
from t2rag.retrieval.dense.embedder import Embedder, EmbedderConfig
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
