"""A module plugin with reranking stages that go wrong the way its `fault` setting says: the bad-input tests' plugin.
`bad_scores` is a `RerankStage` (short: a score missing; drop: a question's scores missing); `raw_rerank` a plain
stage in the rerank pool that rewrites `context_ids` itself (drop: a row dropped; outside: a context that was not
a candidate)."""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
from pydantic import BaseModel

from t2rag.extend import LEXICAL, Method, RerankStage, Stage, register, with_columns


class Fault(BaseModel):
    fault: Literal["none", "short", "drop", "outside"] = "none"


class BadScores(RerankStage):
    name = "bad_scores"
    settings = Fault

    def score(self, questions, texts):
        fault = self.own_settings().fault
        scores = [[-float(i) for i in range(len(t))] for t in texts]
        if fault == "short":
            scores[0] = scores[0][:-1]
        if fault == "drop":
            scores = scores[:-1]
        return scores


class RawRerank(Stage):
    name = "raw_rerank"
    reads = ("context_ids",)
    adds = pa.schema({"context_ids": pa.list_(pa.string())})
    pool = "rerank"
    after = "retrieve"
    settings = Fault

    def __call__(self, batch: pa.Table) -> pa.Table:
        fault = self.own_settings().fault
        if fault == "drop":
            return batch.slice(1)
        ids = [list(reversed(c or [])) for c in batch.column("context_ids").to_pylist()]
        if fault == "outside":
            ids[0] = ["not-a-candidate", *ids[0]]
        return with_columns(batch, {"context_ids": pa.array(ids, pa.list_(pa.string()))})


register("bad_scores", BadScores)
register("raw_rerank", RawRerank)
register("bad_scores", Method("bad_scores", "bm25 reordered by bad_scores", retriever="bm25",
                              stages=(*LEXICAL, "bad_scores")))  # fmt: skip
register("raw_rerank", Method("raw_rerank", "bm25 reordered by raw_rerank", retriever="bm25",
                              stages=(*LEXICAL, "raw_rerank")))  # fmt: skip
