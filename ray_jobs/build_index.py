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

from ray_jobs.common import config_kwargs, dataset_from_table, init_ray
from ray_jobs.generation import generate_dataset
from ray_jobs.stages import SystemStage
from t2rag.config import RunConfig, load_config
from t2rag.data import Corpus
from t2rag.generation.base import Generation
from t2rag.generation.vllm_ray import request_row
from t2rag.methods import get_method
from t2rag.pipeline.answering import summary_requests
from t2rag.retrieval.config import needs_query_vectors
from t2rag.retrieval.vector_store import VectorStore, table_name
from t2rag.summaries import load_summaries, save_summaries, summary_key
from t2rag.system import RAGSystem, finish_summaries

log = logging.getLogger("t2rag.progress")


class EmbedPassages(SystemStage):
    """Passage vectors for a batch of corpus rows (the embedding model loads once per actor)."""

    stage = "embed_passages"

    def process(self, batch: pa.Table) -> pa.Table:
        vectors = self.system.embedder.embed_passages(batch.column("text").to_pylist())
        return pa.table({"doc": batch.column("doc"), "vector": pa.array(list(vectors), pa.list_(pa.float32()))})


def ensure_summaries(config: RunConfig, system: RAGSystem) -> list[str]:
    """Generate and store summaries for every corpus a summary-based method searches; returns the keys made."""
    made = []
    needs = {m for m in config.methods if get_method(m).index_texts == "summary"}
    if not needs:
        return made
    store = VectorStore(config.retrieval.index_uri)
    for subset in system.questions.subsets:
        corpus = system.corpus(subset)
        key = summary_key(corpus, system.generator_config, system.prompts)
        if load_summaries(store, key, corpus) is not None:
            continue
        requests = summary_requests(system.prompts, list(corpus.texts), system.generator_config)
        rows = pa.Table.from_pylist([{"doc": i, **request_row(r)} for i, r in enumerate(requests)])
        start = time.perf_counter()
        out = generate_dataset(dataset_from_table(rows, config.ray.block_rows), config).select_columns(
            ["doc", "raw_output", "generation_error"]
        )
        done = sorted(out.take_all(), key=lambda r: r["doc"])  # corpus-sized index artefact, not results
        texts = finish_summaries([Generation(text=r["raw_output"] or "", error=r["generation_error"]) for r in done])
        save_summaries(store, key, corpus, texts)
        log.info("[summarize] corpus=%s rows=%d %.1fs", corpus.name, len(corpus), time.perf_counter() - start)
        made.append(key)
    return made


def corpora_to_index(config: RunConfig, system: RAGSystem) -> list[Corpus]:
    """Distinct corpora (by fingerprint) that dense-based methods of the run search."""
    seen: dict[str, Corpus] = {}
    for name in config.methods:
        method = get_method(name)
        if not method.retriever or not needs_query_vectors(method.retriever):
            continue
        for subset in system.questions.subsets:
            corpus = system.index_corpus(method, subset)
            seen.setdefault(corpus.fingerprint, corpus)
    return list(seen.values())


def build_indexes(config: RunConfig, system: RAGSystem | None = None) -> list[dict]:
    """Embed and store every corpus the run needs that is not indexed yet."""
    system = system or RAGSystem(config)
    ensure_summaries(config, system)
    store = VectorStore(config.retrieval.index_uri)
    key = config.retrieval.embedder.cache_key
    out = []
    for corpus in corpora_to_index(config, system):
        name = table_name(corpus, key)
        if store.has_table(name, len(corpus)):
            out.append({"corpus": corpus.name, "table": name, "rows": len(corpus), "reused": True})
            continue
        start = time.perf_counter()
        vectors = embed_corpus(config, corpus)
        store.write(name, corpus, vectors)
        seconds = time.perf_counter() - start
        log.info(
            "[build_index] corpus=%s rows=%d %.1fs (%.1f passages/s)",
            corpus.name,
            len(corpus),
            seconds,
            len(corpus) / seconds,
        )
        out.append({"corpus": corpus.name, "table": name, "rows": len(corpus), "reused": False, "seconds": seconds})
    return out


def embed_corpus(config: RunConfig, corpus: Corpus) -> np.ndarray:
    """Passage vectors of a corpus, embedded by an actor pool (GPUs per actor from the config)."""
    import ray

    r = config.ray
    rows = pa.table({"doc": np.arange(len(corpus), dtype=np.int64), "text": list(corpus.texts)})
    ds = dataset_from_table(rows, max(r.embed_batch_size, 1)).map_batches(
        EmbedPassages,
        fn_constructor_kwargs=config_kwargs(config),
        compute=ray.data.ActorPoolStrategy(size=r.embed_actors),
        num_gpus=r.embed_gpus,
        num_cpus=r.embed_cpus,
        batch_size=r.embed_batch_size,
        batch_format="pyarrow",
    )
    vectors = np.zeros((len(corpus), 0), dtype=np.float32)
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        docs = batch.column("doc").to_numpy()
        vecs = np.asarray(batch.column("vector").to_pylist(), dtype=np.float32)
        if vectors.shape[1] == 0:
            vectors = np.zeros((len(corpus), vecs.shape[1]), dtype=np.float32)
        vectors[docs] = vecs
    return vectors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = load_config(args.config)
    init_ray(config.ray)
    for entry in build_indexes(config):
        print(entry)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
