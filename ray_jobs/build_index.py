"""Build (or reuse) the dense indexes a run needs: passages embedded in an actor pool, stored in LanceDB.

    python -m ray_jobs.build_index --config configs/paper_table3.yaml

Summaries for the summary-based methods are generated first (through the run's generator) and stored next to
the indexes; an index whose table already holds the corpus (same fingerprint and embedder) is reused.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import pyarrow as pa

from ray_jobs.common import dataset_from_table, init_ray
from ray_jobs.placement import place
from t2rag.config import RunConfig, load_config
from t2rag.data import Corpus
from t2rag.methods import get_method
from t2rag.quiet import quiet_libraries
from t2rag.resources import Resources
from t2rag.retrieval import build_retriever
from t2rag.retrieval.base import DensePassages
from t2rag.retrieval.vector_store import VectorStore
from t2rag.stages.context_summaries import ensure_context_summaries
from t2rag.stages.embed import vectors_of

log = logging.getLogger("t2rag.progress")


def summarize_contexts(config: RunConfig, resources: Resources) -> None:
    """Generate and store the summaries of every corpus a summary-indexed method searches (Ray generates them)."""
    if not any(get_method(m).index_texts == "summary" for m in config.methods):
        return

    def generate(rows: pa.Table) -> pa.Table:
        ds = place(dataset_from_table(rows, config.ray.block_rows), ("generate",), config)
        return pa.Table.from_pylist(ds.select_columns(["doc", "raw_output", "generation_error"]).take_all())

    for subset in resources.questions.subsets:
        start = time.perf_counter()
        corpus = resources.corpus(subset)
        ensure_context_summaries(resources, corpus, generate)
        log.info("[summarize] corpus=%s rows=%d %.1fs", corpus.name, len(corpus), time.perf_counter() - start)


def tables_to_index(config: RunConfig, resources: Resources) -> list[DensePassages]:
    """Distinct vector tables (by name) that the dense-based methods of the run search."""
    seen: dict[str, DensePassages] = {}
    for name in config.methods:
        method = get_method(name)
        if "embed_queries" not in method.stages:  # only dense searches read a vector index
            continue
        retriever = build_retriever(method.retriever, config.retrieval)
        for subset in resources.questions.subsets:
            for plan in retriever.dense_passages(resources.index_corpus(method, subset)):
                seen.setdefault(plan.table, plan)
    return list(seen.values())


def build_indexes(config: RunConfig, resources: Resources | None = None) -> list[dict]:
    """Embed and store every table the run needs that is not indexed yet (contexts, or their chunks)."""
    resources = resources or Resources(config)
    summarize_contexts(config, resources)
    store = VectorStore(config.retrieval.index_uri, config.retrieval.ann)
    out = []
    for plan in tables_to_index(config, resources):
        name, passages = plan.table, plan.passages
        row = {"corpus": passages.name, "table": name, "rows": len(passages)}
        if store.has_table(name, len(passages)):
            table = store.open(name)  # builds a missing ANN index the config wants
            out.append({**row, "reused": True, **table.search_info})
            continue
        start = time.perf_counter()
        table = store.write(name, passages, embed_corpus(config, passages), plan.docs)
        seconds = time.perf_counter() - start
        log.info(
            "[build_index] corpus=%s rows=%d %.1fs (%.1f passages/s)",
            passages.name,
            len(passages),
            seconds,
            len(passages) / seconds,
        )
        out.append({**row, "reused": False, "seconds": seconds, **table.search_info})
    return out


def embed_corpus(config: RunConfig, corpus: Corpus) -> np.ndarray:
    """Passage vectors of a corpus, embedded by an actor pool (GPUs per actor from the config)."""
    rows = pa.table({"doc": np.arange(len(corpus), dtype=np.int64), "text": list(corpus.texts)})
    ds = place(dataset_from_table(rows, config.ray.embed_batch_size), ("embed_passages",), config)
    vectors = np.zeros((len(corpus), 0), dtype=np.float32)
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        docs = batch.column("doc").to_numpy()
        vecs = vectors_of(batch.column("vector"))
        if vectors.shape[1] == 0:
            vectors = np.zeros((len(corpus), vecs.shape[1]), dtype=np.float32)
        vectors[docs] = vecs
    return vectors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet_libraries()
    config = load_config(args.config)
    init_ray(config.ray)
    for entry in build_indexes(config):
        print(entry)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
