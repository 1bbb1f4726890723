"""A probe of every plugin retriever of a run on one small block, before any record is written."""

from __future__ import annotations

import logging

from t2rag import plugins
from t2rag.config import RunConfig
from t2rag.errors import PluginError, first_line
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval import QueryBlock, build_retriever
from t2rag.retrieval.base import result_depth

log = logging.getLogger(__name__)

#: Questions and contexts of the probe: enough to find a wrong shape, a position outside the corpus or a NaN score.
PROBE_QUESTIONS = 4
PROBE_CONTEXTS = 64


def probe_plugin_retrievers(config: RunConfig, resources: Resources) -> None:
    """Index each plugin retriever of the run on the first contexts of a corpus and search a few questions, so a
    retriever returning the wrong shape, positions outside the corpus or NaN scores ends the run (one line, exit 2)
    before anything is written. Retrievers that read query vectors are checked on their first block instead."""
    questions = resources.questions.scored()
    if questions.num_rows == 0:
        return
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
        try:
            retriever.index(few)
            retriever.search(QueryBlock(texts), config.retrieval.k, depth=result_depth(config.retrieval.k))
        except PluginError:
            raise
        except Exception as exc:  # a search that raises is the run's to retry, block by block, like a built-in's
            log.warning("plugin retriever %s raised in its probe (%s: %s); the run retries its blocks", name,
                        type(exc).__name__, first_line(exc))  # fmt: skip
