"""Index build and search time per retriever on the bundled sample, and embedding throughput on this machine.

Each retriever indexes each subset's corpus from scratch (a fresh LanceDB directory, so nothing is reused) and then
searches all of that subset's questions in one block. Usage: python bench/retrieval.py [--methods ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from t2rag.data import build_corpora, load_questions
from t2rag.retrieval import Embedder, EmbedderConfig, QueryBlock, RetrievalConfig, build_retriever


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=None)
    parser.add_argument("--methods", default="bm25,base,hybrid_bm25,hybrid_rrf")
    parser.add_argument("--k", type=int, default=3)
    args = parser.parse_args()
    questions = load_questions(args.data)
    corpora = build_corpora(questions)
    embedder = Embedder(EmbedderConfig())

    print("embedding throughput (all-MiniLM-L6-v2, CPU):")
    vectors = {}
    query_vectors = {}
    for subset, corpus in corpora.items():
        texts = questions.subset(subset).table.column("question").to_pylist()
        start = time.perf_counter()
        vectors[subset] = embedder.embed_passages(corpus.texts)
        p = time.perf_counter() - start
        start = time.perf_counter()
        query_vectors[subset] = embedder.embed_queries(texts)
        q = time.perf_counter() - start
        print(
            f"  {subset:8} passages {len(corpus) / p:6.1f}/s ({len(corpus)} in {p:.1f}s)   "
            f"questions {len(texts) / q:6.1f}/s ({len(texts)} in {q:.1f}s)"
        )

    print("\nper retriever (index build excludes embedding; search is one block of all questions):")
    print(f"  {'method':12} {'subset':8} {'index s':>8} {'search s':>9} {'queries/s':>10}")
    for method in args.methods.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            config = RetrievalConfig(k=args.k, index_uri=tmp)
            for subset, corpus in corpora.items():
                texts = questions.subset(subset).table.column("question").to_pylist()
                retriever = build_retriever(method, config)
                start = time.perf_counter()
                retriever.index(corpus, vectors=vectors[subset])
                index_s = time.perf_counter() - start
                start = time.perf_counter()
                retriever.search(QueryBlock(texts, query_vectors[subset]), args.k)
                search_s = time.perf_counter() - start
                print(f"  {method:12} {subset:8} {index_s:8.3f} {search_s:9.3f} {len(texts) / search_s:10.0f}")


if __name__ == "__main__":
    main()
