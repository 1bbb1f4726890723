"""The stable surface for methods, retrievers and stages of your own (docs/plugins.md).

Interface version 1 (`INTERFACE_VERSION`). What this module exports keeps its meaning within a major version of
the interface; anything else in t2rag may change between releases. A plugin is either

- an installed package whose entry points name its objects, in the groups `t2rag.methods` (a `Method` or a
  `RankFusion`), `t2rag.retrievers` (a `RetrieverPlugin`) and `t2rag.stages` (a `Stage` subclass), the entry point's
  name being the registered name; or
- a module named in a run config's `plugins:` list (beside the config or on the path), which calls `register` at
  import.

The pieces:

- `Retriever`: index a corpus once (`index(corpus, vectors=None)`), then `search(queries, k, depth)` a block of
  questions (a `QueryBlock`: `.texts`, and `.vectors` when `needs_query_vectors`), returning `Hits`: corpus positions
  (int64, -1 pads a short row) and scores (float64), `result_depth(k, depth)` of each per question, best first;
  `corpus` returns the indexed `Corpus` (`.texts`, `.context_ids`, `.metadata`). Every block a plugin's retriever
  returns is checked (shape, positions inside the corpus, no NaN score beside a position).
- `RetrieverPlugin(build, settings=None, needs_query_vectors=False)`: how to make one; `build(settings)` gets the
  validated block of the run config's `settings: {NAME: {...}}` when `settings` is a pydantic model, else `build()`.
  With `needs_query_vectors` it is dense: every block's `QueryBlock.vectors` holds the questions' embeddings and
  `index(corpus, vectors)` gets the passages' (the run's embedder, cached as the built-in dense methods' are; on
  Ray embedded by the embedding pool), and its method must embed the question (`DENSE`).
- `Stage`: Arrow batch in, Arrow batch out. Declare `name`, the columns it `reads` (and `optional`), what it
  `adds` (a pyarrow schema) and `drops`, its `pool` (one of `PoolKind`: which actors Ray places it on) and `after`
  (the stage it follows; default: after the ranking stages); `settings` (a pydantic model) for a block of its own,
  read with `self.own_settings()`. Build on `self.resources`, which loads models and corpora once per process.
- `RerankStage`: a stage that reorders a ranking: write `score(questions, texts)` (one score per text of the first
  `candidates` ranked contexts of each question) and it runs in the `rerank` pool after `retrieve`; a plugin stage
  that rewrites `context_ids` may not drop a row or name a context outside its row's candidates.
- `Method(name, description, retriever=..., stages=...)`: the stages that turn a question into a ranking (`LEXICAL`
  for a retriever that reads the question's text, `DENSE` for one that reads its embedding); the answering stages
  follow when a run generates.
- `RankFusion(name, retrievers, k_rrf=60, candidates=50)`: a retriever and a method of that name, reciprocal-rank
  fusion of registered retrievers (a run config's `rank_fusion:` entry makes the same).
"""

from __future__ import annotations

from t2rag import plugins
from t2rag.data.corpus import Corpus
from t2rag.errors import PluginError
from t2rag.methods import DENSE, LEXICAL, Method
from t2rag.pools import PoolKind
from t2rag.retrieval.base import Hits, IndexedMixin, QueryBlock, Retriever, as_block, result_depth
from t2rag.retrieval.config import RankFusion, RetrieverPlugin
from t2rag.stages.base import Stage, column, with_columns
from t2rag.stages.rerank import RerankStage

INTERFACE_VERSION = 1

#: Registration groups by the type of what is registered.
_GROUP_OF = {Method: "t2rag.methods", RankFusion: "t2rag.methods", RetrieverPlugin: "t2rag.retrievers"}


def register(name: str, entry: Method | RankFusion | RetrieverPlugin | type[Stage]) -> None:
    """Register a method, rank fusion, retriever or stage as `name`; called by a module plugin at import (its
    registrations are attributed to it) or by a program of your own."""
    if isinstance(entry, type) and issubclass(entry, Stage):
        group = "t2rag.stages"
    elif type(entry) in _GROUP_OF:
        group = _GROUP_OF[type(entry)]
    else:
        raise PluginError(f"cannot register '{name}': a {type(entry).__name__} is no Method, RankFusion, "
                          "RetrieverPlugin or Stage subclass")  # fmt: skip
    origin = plugins.current_origin() or plugins.Origin("__main__")
    plugins.register(group, name, entry, origin)


__all__ = [
    "DENSE",
    "INTERFACE_VERSION",
    "LEXICAL",
    "Corpus",
    "Hits",
    "IndexedMixin",
    "Method",
    "PoolKind",
    "QueryBlock",
    "RankFusion",
    "RerankStage",
    "Retriever",
    "RetrieverPlugin",
    "Stage",
    "as_block",
    "column",
    "register",
    "result_depth",
    "with_columns",
]
