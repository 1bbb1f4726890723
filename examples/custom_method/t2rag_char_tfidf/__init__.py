"""An example t2rag plugin: a retriever that scores contexts by TF-IDF over character n-grams (scikit-learn), a
method that ranks with it alone, one that fuses it with t2rag's bm25_focus by reciprocal-rank fusion, and a
reranking stage (TF-IDF cosine of the question against each of bm25_focus's first 10 candidates) with its method.

Character n-grams match what word tokens miss in financial pages: "FY2019" against "2019", "net-sales" against
"net sales", a figure's digits inside a longer token.
"""

from t2rag.extend import LEXICAL, Method, RankFusion, RetrieverPlugin
from t2rag_char_tfidf.rerank import TfidfRerank, TfidfRerankSettings
from t2rag_char_tfidf.retriever import CharTfidfRetriever, CharTfidfSettings

__version__ = "0.1.0"

CHAR_TFIDF = RetrieverPlugin(
    build=CharTfidfRetriever,
    settings=CharTfidfSettings,
    description="cosine of TF-IDF vectors over character n-grams",
)
CHAR_TFIDF_METHOD = Method(
    "char_tfidf", "TF-IDF over character n-grams (scikit-learn)", retriever="char_tfidf", stages=LEXICAL
)
TFIDF_FOCUS = RankFusion(
    "tfidf_focus",
    ("char_tfidf", "bm25_focus"),
    description="char_tfidf fused with bm25_focus by reciprocal-rank fusion",
)

FOCUS_TFIDF_RERANK = Method(
    "focus_tfidf_rerank",
    "bm25_focus's first 10 reordered by TF-IDF cosine with the question (fitted on those 10)",
    retriever="bm25_focus",
    stages=(*LEXICAL, "tfidf_rerank"),
)

__all__ = [
    "CHAR_TFIDF",
    "CHAR_TFIDF_METHOD",
    "FOCUS_TFIDF_RERANK",
    "TFIDF_FOCUS",
    "CharTfidfRetriever",
    "CharTfidfSettings",
    "TfidfRerank",
    "TfidfRerankSettings",
]
