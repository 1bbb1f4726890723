"""A module plugin whose retriever goes wrong the way its `fault` setting says: the bad-input tests' plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel

from t2rag.extend import (
    LEXICAL,
    Hits,
    IndexedMixin,
    Method,
    Retriever,
    RetrieverPlugin,
    as_block,
    register,
    result_depth,
)


class Fault(BaseModel):
    #: shape: one result too few; range: a position past the corpus; nan: NaN scores; raise_once: the first block
    #: of more than 4 questions raises (once per `flag` file); raise: every block raises.
    fault: Literal["none", "shape", "range", "nan", "raise_once", "raise"] = "none"
    flag: str | None = None


class Faulty(IndexedMixin, Retriever):
    name = "faulty"

    def __init__(self, settings: Fault):
        self.fault, self.flag = settings.fault, settings.flag

    def index(self, corpus, vectors=None) -> None:
        self._corpus = corpus

    def search(self, queries, k, depth=None) -> Hits:
        block = as_block(queries)
        n, n_docs = result_depth(k, depth), len(self.corpus)
        indices = np.tile(np.arange(n, dtype=np.int64) % max(n_docs, 1), (len(block), 1))
        indices[:, n_docs:] = -1
        scores = np.tile(-np.arange(n, dtype=np.float64), (len(block), 1))
        if self.fault == "shape":
            return Hits(indices[:, :-1], scores[:, :-1])
        if self.fault == "range":
            indices[0, 0] = n_docs + 5
        if self.fault == "nan":
            scores[:, 1] = np.nan
        if self.fault == "raise":
            raise RuntimeError("the index server went away")
        if self.fault == "raise_once" and len(block) > 4 and self.flag and not Path(self.flag).exists():
            Path(self.flag).write_text("raised")
            raise RuntimeError("the index server went away once")
        return Hits(indices, scores)


register("faulty", RetrieverPlugin(Faulty, settings=Fault))
register("faulty", Method("faulty", "a retriever that fails as told", retriever="faulty", stages=LEXICAL))
