"""A probe of a run's plugin retrievers and reranking stages on one small block, before any record is written."""

from __future__ import annotations

import logging

import pyarrow as pa

from t2rag import plugins
from t2rag.config import RunConfig
from t2rag.errors import PluginError, first_line
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval import QueryBlock, build_retriever
from t2rag.retrieval.base import result_depth
from t2rag.stages import STAGES
from t2rag.stages.base import run_chain

log = logging.getLogger(__name__)

#: Questions and contexts of the probe: enough to find a wrong shape, a position outside the corpus or a NaN score.
PROBE_QUESTIONS = 4
PROBE_CONTEXTS = 64
#: The candidates a reranking stage's probe gives each question.
PROBE_CANDIDATES = 10


def probe_plugins(config: RunConfig, resources: Resources) -> None:
    """Probe each plugin retriever and each plugin stage that rewrites rankings, so one that answers in the wrong
    shape ends the run (one line naming it, exit 2) before anything is written. A probe that raises anything else
    is left to the run, which retries a raising block like a built-in's."""
    questions = resources.questions.scored()
    if questions.num_rows == 0:
        return
    _probe_retrievers(config, resources, questions)
    _probe_rankers(config, resources, questions)


def _probing(what: str, probe) -> None:
    try:
        probe()
    except PluginError:
        raise
    except Exception as exc:
        log.warning("plugin %s raised in its probe (%s: %s); the run retries its blocks", what, type(exc).__name__,
                    first_line(exc))  # fmt: skip


def _probe_retrievers(config: RunConfig, resources: Resources, questions: pa.Table) -> None:
    """Index each plugin retriever on the first contexts of a corpus and search a few questions. Retrievers that
    read query vectors are checked on their first block instead."""
    texts = questions.column("question").to_pylist()[:PROBE_QUESTIONS]
    subset = questions.column("subset")[0].as_py()
    for name in dict.fromkeys(get_method(m).retriever for m in config.methods if get_method(m).retriever):
        if plugins.origin_of("t2rag.retrievers", name).built_in:
            continue
        retriever = build_retriever(name, config.retrieval, config.settings)
        if retriever.needs_query_vectors:
            continue
        corpus = resources.corpus(subset)
        few = corpus.select(list(range(min(PROBE_CONTEXTS, len(corpus)))), f"{corpus.name}[probe]")

        def probe(retriever=retriever, few=few) -> None:
            retriever.index(few)
            retriever.search(QueryBlock(texts), config.retrieval.k, depth=result_depth(config.retrieval.k))

        _probing(f"retriever {name}", probe)


def _probe_rankers(config: RunConfig, resources: Resources, questions: pa.Table) -> None:
    """Run each plugin stage that rewrites rankings on a few questions of their own subset, each with the first
    contexts of its corpus as its candidates (methods that search generated summaries are checked on their first
    block instead)."""
    for method in map(get_method, config.methods):
        rankers = [s for s in method.stages if s in STAGES and "context_ids" in STAGES[s].adds.names
                   and not plugins.origin_of("t2rag.stages", s).built_in]  # fmt: skip
        if not rankers or method.index_texts == "summary":
            continue
        rows = questions.slice(0, PROBE_QUESTIONS).to_pylist()
        ids = {s: resources.corpus(s).context_ids[:PROBE_CANDIDATES] for s in {r["subset"] for r in rows}}
        batch = pa.table({
            "id": [r["id"] for r in rows],
            "subset": [r["subset"] for r in rows],
            "method": [method.name] * len(rows),
            "question": [r["question"] for r in rows],
            "context_id": [r["context_id"] for r in rows],
            "context_ids": pa.array([list(ids[r["subset"]]) for r in rows], pa.list_(pa.string())),
            "scores": pa.array([[float("nan")] * len(ids[r["subset"]]) for r in rows], pa.list_(pa.float64())),
            "gold_rank": pa.array([0] * len(rows), pa.int32()),
        })  # fmt: skip
        for name in rankers:
            steps = [(name, STAGES[name](resources))]
            _probing(f"stage {name}", lambda steps=steps, batch=batch: run_chain(steps, batch))
