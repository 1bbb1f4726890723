"""A module plugin as a user writes one beside a run config (no package, no install): a retriever that counts the
distinct words a question shares with each context, a stage that rewrites the question first, and a method of
both. The tests copy it next to their configs and name it in `plugins:`."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field
from scipy.sparse import csr_matrix

from t2rag.extend import (
    Corpus,
    Hits,
    IndexedMixin,
    Method,
    Retriever,
    RetrieverPlugin,
    Stage,
    as_block,
    column,
    register,
    result_depth,
    with_columns,
)

__version__ = "0.2.0"

WORD = re.compile(r"[a-z0-9]+")


class OverlapSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_length: int = Field(3, ge=1)  # shorter words are not counted


class WordOverlap(IndexedMixin, Retriever):
    name = "word_overlap"

    def __init__(self, settings: OverlapSettings):
        self.min_length = settings.min_length

    def _words(self, text: str) -> set[str]:
        return {w for w in WORD.findall(text.lower()) if len(w) >= self.min_length}

    def index(self, corpus: Corpus, vectors=None) -> None:
        self.vocabulary: dict[str, int] = {}
        rows, cols = [], []
        for doc, text in enumerate(corpus.texts):
            for word in self._words(text):
                rows.append(self.vocabulary.setdefault(word, len(self.vocabulary)))
                cols.append(doc)
        shape = (len(self.vocabulary), len(corpus))
        self.matrix = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
        self._corpus = corpus

    def search(self, queries, k, depth=None) -> Hits:
        block = as_block(queries)
        n, n_docs = result_depth(k, depth), len(self.corpus)
        rows, cols = [], []
        for q, text in enumerate(block.texts):
            ids = [self.vocabulary[w] for w in self._words(text) if w in self.vocabulary]
            rows += [q] * len(ids)
            cols += ids
        asked = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(block), len(self.vocabulary)))
        scores = (asked @ self.matrix).toarray()
        take = min(n, n_docs)
        indices, out = np.full((len(block), n), -1, np.int64), np.full((len(block), n), np.nan)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :take]
        indices[:, :take], out[:, :take] = order, np.take_along_axis(scores, order, axis=1)
        return Hits(indices, out)


class FoldQuestions(Stage):
    """`question` -> `question`, case-folded, with `%` read as `percent`."""

    name = "fold_questions"
    reads = ("question",)
    adds = pa.schema({"question": pa.string()})
    pool = "light"
    stateful = False
    after = "route"

    def __call__(self, batch: pa.Table) -> pa.Table:
        folded = [q.casefold().replace("%", " percent") for q in column(batch, "question")]
        return with_columns(batch, {"question": pa.array(folded, pa.string())})


register("word_overlap", RetrieverPlugin(WordOverlap, settings=OverlapSettings))
register("fold_questions", FoldQuestions)
register(
    "overlap",
    Method("overlap", "distinct shared words of the folded question", retriever="word_overlap",
           stages=("fold_questions", "retrieve")),
)  # fmt: skip
