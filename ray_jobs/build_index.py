"""Build (or reuse) the dense indexes a run needs: passages embedded in an actor pool, stored in LanceDB.

    python -m ray_jobs.build_index --config configs/paper_table3.yaml

Summaries for the summary-based methods are generated first (through the run's generator) and stored next to
the indexes; an index whose table already holds the corpus (same fingerprint and embedder) is reused.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ray_jobs.common import log_stage_lines, read_meter, stage_meter
from ray_jobs.durable import start_job
from ray_jobs.generator_service import GeneratorService
from ray_jobs.placement import place
from ray_jobs.table_blocks import dataset_from_table
from t2rag.config import RunConfig
from t2rag.data import Corpus
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval import build_retriever
from t2rag.retrieval.base import DensePassages
from t2rag.retrieval.dense.vector_store import VectorStore
from t2rag.stages.embed import vectors_of

log = logging.getLogger("t2rag.progress")


def needs_summaries(config: RunConfig) -> bool:
    return any(get_method(m).index_texts == "summary" for m in config.methods)


def summarize_contexts(config: RunConfig, resources: Resources, service: GeneratorService) -> None:
    """Generate and store the summaries of every corpus a summary-indexed method searches, on the run's generator
    service (stored batch by batch as they finish)."""

    def generate(rows: pa.Table) -> Iterator[pa.Table]:
        ds = place(dataset_from_table(rows, config.ray.block_rows), ("generate",), config, service)
        yield from ds.iter_batches(batch_format="pyarrow", batch_size=None)

    for subset in resources.questions.subsets:
        start = time.perf_counter()
        corpus = resources.corpus(subset)
        resources.context_summary_corpus(corpus, generate)
        log.info("[summarize] corpus=%s rows=%d %.1fs", corpus.name, len(corpus), time.perf_counter() - start)


def tables_to_index(config: RunConfig, resources: Resources) -> list[DensePassages]:
    """Distinct vector tables (by name) that the dense-based methods of the run search."""
    seen: dict[str, DensePassages] = {}
    for name in config.methods:
        method = get_method(name)
        if not method.searches_vectors:
            continue
        retriever = build_retriever(method.retriever, config.retrieval, config.settings)
        for subset in resources.questions.subsets:
            for passages in retriever.dense_passages(resources.index_corpus(method, subset)):
                seen.setdefault(passages.table, passages)
    return list(seen.values())


def build_indexes(
    config: RunConfig, resources: Resources | None = None, service: GeneratorService | None = None
) -> list[dict]:
    """Embed and store every table the run needs that is not indexed yet (contexts, or their chunks). The missing
    tables are embedded in one pass through one actor pool (one model load), each stored as soon as it is whole.
    Context summaries are generated first, on `service` (the run's generator; without one, a service of its own)."""
    resources = resources or Resources(config)
    if needs_summaries(config):
        with contextlib.nullcontext(service) if service else GeneratorService(config) as generator:
            summarize_contexts(config, resources, generator)
    store = VectorStore(config.retrieval.index_uri, config.retrieval.ann)
    out, missing = [], []
    for dense in tables_to_index(config, resources):
        if store.has_table(dense.table, len(dense.passages)):
            table = store.open(dense.table)  # builds a missing ANN index the config wants
            out.append({**_row(dense), "reused": True, **table.search_info})
        else:
            missing.append(dense)
    start = time.perf_counter()
    for position, vectors in embed_corpora(config, [dense.passages for dense in missing]):
        dense = missing[position]
        table = store.write(dense.table, dense.passages, vectors, dense.docs)
        seconds = time.perf_counter() - start
        rows = len(dense.passages)
        log.info("[build_index] corpus=%s rows=%d whole after %.1fs", dense.passages.name, rows, seconds)
        out.append({**_row(dense), "reused": False, "seconds": seconds, **table.search_info})
    return out


def _row(dense: DensePassages) -> dict:
    return {"corpus": dense.passages.name, "table": dense.table, "rows": len(dense.passages)}


def embed_corpus(config: RunConfig, corpus: Corpus) -> np.ndarray:
    """Passage vectors of a corpus, embedded by an actor pool (GPUs per actor from the config)."""
    return dict(embed_corpora(config, [corpus]))[0]


def embed_corpora(config: RunConfig, corpora: list[Corpus]) -> Iterator[tuple[int, np.ndarray]]:
    """(position, passage vectors) of each corpus as soon as all its passages are embedded; all of them stream
    through one actor pool."""
    sizes = [len(c) for c in corpora]
    yield from ((part, np.zeros((0, 0), dtype=np.float32)) for part, n in enumerate(sizes) if n == 0)
    if not any(sizes):
        return
    rows = pa.table(
        {
            "part": np.repeat(np.arange(len(corpora), dtype=np.int64), sizes),
            "doc": np.concatenate([np.arange(n, dtype=np.int64) for n in sizes]),
            "text": [t for c in corpora for t in c.texts],
        }
    )
    ds = place(dataset_from_table(rows, config.ray.embed_batch_size), ("embed_passages",), config)
    vectors: dict[int, np.ndarray] = {}
    left = dict(enumerate(sizes))
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        vecs = vectors_of(batch.column("vector"))
        parts, docs = batch.column("part").to_numpy(), batch.column("doc").to_numpy()
        for part in np.unique(parts).tolist():
            mine = parts == part
            if part not in vectors:
                vectors[part] = np.zeros((sizes[part], vecs.shape[1]), dtype=np.float32)
            vectors[part][docs[mine]] = vecs[mine]
            left[part] -= int(mine.sum())
            if left[part] == 0:
                yield part, vectors.pop(part)
    short = [corpora[part].name for part, n in left.items() if n > 0]
    if short:
        raise RuntimeError(f"the embedding pool returned too few vectors for {', '.join(short)}")


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    config = start_job(args.config)
    meter = stage_meter()  # held for the job; the embedding actors report to it
    for entry in build_indexes(config):
        print(entry)
    log_stage_lines(read_meter(meter))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
