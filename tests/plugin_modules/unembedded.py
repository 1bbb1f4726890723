"""A module plugin whose dense retriever's method forgets to embed the question: refused at registration."""

from __future__ import annotations

from t2rag.extend import LEXICAL, Hits, IndexedMixin, Method, Retriever, RetrieverPlugin, register


class NeverSearched(IndexedMixin, Retriever):
    name = "unembedded"

    def index(self, corpus, vectors=None) -> None:
        self._corpus = corpus

    def search(self, queries, k, depth=None) -> Hits:
        raise AssertionError("a refused method never searches")


register("unembedded", RetrieverPlugin(NeverSearched, needs_query_vectors=True))
register("unembedded", Method("unembedded", "a dense retriever read with LEXICAL stages", retriever="unembedded",
                              stages=LEXICAL))  # fmt: skip
