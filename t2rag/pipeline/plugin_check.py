"""What a run owes to plugins: the outside code its methods use (named in its result and manifest, with versions),
and a probe of every plugin retriever on one small block before any record is written."""

from __future__ import annotations

import logging

from t2rag import plugins
from t2rag.config import RunConfig
from t2rag.errors import PluginError, first_line
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.retrieval import QueryBlock, build_retriever
from t2rag.retrieval.base import result_depth
from t2rag.retrieval.config import RETRIEVERS

log = logging.getLogger(__name__)

#: Questions and contexts of the probe: enough to find a wrong shape, a position outside the corpus or a NaN score.
PROBE_QUESTIONS = 4
PROBE_CONTEXTS = 64


def plugins_of(config: RunConfig) -> dict[str, dict[str, dict[str, str | None]]]:
    """Every method, retriever and stage of the run that came from outside t2rag, by kind and name, each with its
    source and version (a method's also with what its generator reads, so a report can attribute its answers
    without loading the plugin)."""
    pairs: list[tuple[str, str]] = []
    for name in config.methods:
        method = get_method(name)
        pairs.append(("t2rag.methods", method.name.partition("@")[0]))
        if method.retriever:
            pairs += [("t2rag.retrievers", r) for r in retriever_names(method.retriever)]
        pairs += [("t2rag.stages", s) for s in method.stages]
    found = plugins.origins_in_use(dict.fromkeys(pairs))
    for name, entry in found.get("methods", {}).items():
        entry["reader"] = get_method(name).reader
    return found


def retriever_names(name: str) -> list[str]:
    """A retriever and, for a rank fusion, the retrievers it fuses (recursively)."""
    return [name, *(m for member in RETRIEVERS[name].members for m in retriever_names(member))]


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
