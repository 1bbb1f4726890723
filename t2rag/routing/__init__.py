"""Query routing over the pooled corpus, as a modular RAG benchmark (mmRAG, section 5) scores it: a router ranks
the loaded subsets' corpora for a question before retrieval, the method searches the top one (or the top
`routing.top`), and the ranking is scored against the question's own subset (routing accuracy and NDCG@3)."""
