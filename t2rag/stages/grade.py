"""The generator grades what was retrieved (Self-RAG's relevance judgment, Corrective RAG's evaluator).

`grade_prompts` asks, in one prompt per question, which of the top k retrieved excerpts help answer it (template
t2rag/prompts/grade.md, an answer such as `{"relevant": [1, 3]}`); `generate` runs it; `grade_contexts` puts the
excerpts judged relevant first in the ranking and sets `reader_ids`, the excerpts the generator then reads: those
judged relevant, nothing when none is (Self-RAG answers from its own knowledge then), or, for a method with a
`fallback` (Corrective RAG), `corrective_retrieve` ranks that question again with the fallback method's retriever and
the generator reads the new top k. A grade that cannot be read leaves the ranking and the reading as they were.
"""

from __future__ import annotations

import json
import re
from functools import cached_property

import pyarrow as pa

from t2rag.generation.base import ChatRequest
from t2rag.generation.requests import GENERATION_COLUMNS, REQUEST_COLUMNS, REQUEST_TYPES, request_columns
from t2rag.methods import get_method
from t2rag.prompts import STAND_IN, Prompts, chars_of
from t2rag.stages.base import CORPUS_COLUMNS, Stage, column, corpus_column, row_k, with_columns
from t2rag.stages.retrieve import RANKING_TYPES, Retrieve

#: The grade's JSON, for engines that constrain their output to a schema.
GRADE_SCHEMA = {
    "type": "object",
    "properties": {"relevant": {"type": "array", "items": {"type": "integer"}}},
    "required": ["relevant"],
    "additionalProperties": False,
}
READER_TYPES = {"reader_ids": pa.list_(pa.string()), "relevant": pa.int32()}
_RELEVANT = re.compile(r'"relevant"\s*:\s*\[([^\]]*)\]')


def parse_grade(text: str | None, graded: int) -> list[int] | None:
    """The 1-based numbers of the excerpts judged relevant, in the grade's order without repeats (numbers outside
    1..graded left out); None when the text holds no grade."""
    match = _RELEVANT.search(text or "")
    if match is None:
        return None
    try:
        numbers = json.loads(f"[{match.group(1)}]")
    except ValueError:
        return None
    kept = [n for n in numbers if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= graded]
    return list(dict.fromkeys(kept))


class GradePrompts(Stage):
    """`question`, `context_ids` (ranked), `corpus` or `subset`, `method`, `k` (optional) -> `messages_json`,
    `params_json` asking which of the top k excerpts help."""

    name = "grade_prompts"
    reads = ("method", "question", "context_ids")
    optional = (*CORPUS_COLUMNS, "k")
    adds = pa.schema(REQUEST_TYPES)

    @classmethod
    def planned_prompts(cls, prompts: Prompts, n: int, question_chars: int, contexts: int, context_chars: float
                        ) -> tuple[float, int]:  # fmt: skip
        around = chars_of(prompts.grade(STAND_IN, [""] * contexts)) - len(STAND_IN)
        return n * (around + contexts * context_chars) + question_chars, prompts.config.grade_max_tokens

    def __call__(self, batch: pa.Table) -> pa.Table:
        prompts, generator = self.resources.prompts, self.resources.generator_config
        schema = GRADE_SCHEMA if generator.constrained_json else None
        params = generator.sampling.model_copy(update={"max_tokens": prompts.config.grade_max_tokens,
                                                       "json_schema": schema})  # fmt: skip
        ranked, ks = batch.column("context_ids").to_pylist(), row_k(batch, self.config.retrieval.k)
        requests = []
        for question, ids, corpus_name, method, k in zip(
            batch.column("question").to_pylist(), ranked, corpus_column(batch).to_pylist(),
            batch.column("method").to_pylist(), ks, strict=True,
        ):  # fmt: skip
            texts = self.resources.corpus(corpus_name).texts_of((ids or [])[: get_method(method).texts_read(k)])
            requests.append(ChatRequest(prompts.grade(question, texts), params))
        return with_columns(batch, request_columns(requests))


class GradeContexts(Stage):
    """`raw_output` (the grade), the ranking -> the ranking with the relevant excerpts first, `reader_ids` (what the
    generator reads: the relevant ones; null: the top k as usual) and `relevant` (how many; null: no grade read).
    The generation and request columns are dropped so the answer stages start clean."""

    name = "grade_contexts"
    reads = ("method", "raw_output", *RANKING_TYPES)
    optional = ("context_id", "k")
    adds = pa.schema({**RANKING_TYPES, **READER_TYPES})
    drops = (*GENERATION_COLUMNS, *REQUEST_COLUMNS)
    stateful = False

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = {name: batch.column(name).to_pylist() for name in RANKING_TYPES}
        readers: list = [None] * batch.num_rows
        relevant: list = [None] * batch.num_rows
        gold = column(batch, "context_id")
        grades = batch.column("raw_output").to_pylist()
        methods, ks = batch.column("method").to_pylist(), row_k(batch, self.config.retrieval.k)
        for i, (text, method, k) in enumerate(zip(grades, methods, ks, strict=True)):
            ids, scores = out["context_ids"][i] or [], out["scores"][i] or []
            judged = parse_grade(text, min(get_method(method).texts_read(k), len(ids)))
            if judged is None:
                continue
            order = [n - 1 for n in judged] + [j for j in range(len(ids)) if j + 1 not in judged]
            out["context_ids"][i] = [ids[j] for j in order]
            out["scores"][i] = [scores[j] for j in order]
            if gold[i] is not None:
                out["gold_rank"][i] = out["context_ids"][i].index(gold[i]) + 1 if gold[i] in ids else 0
            readers[i] = out["context_ids"][i][: len(judged)]
            relevant[i] = len(judged)
        columns = {name: pa.array(values, RANKING_TYPES[name]) for name, values in out.items()}
        columns["reader_ids"] = pa.array(readers, READER_TYPES["reader_ids"])
        columns["relevant"] = pa.array(relevant, READER_TYPES["relevant"])
        return with_columns(self.without_drops(batch), columns)


class CorrectiveRetrieve(Stage):
    """Rows of a method with a `fallback` whose grade found nothing relevant (`relevant` 0) -> ranked again by the
    fallback method's retriever; the generator reads that ranking's top k (`reader_ids` null)."""

    name = "corrective_retrieve"
    reads = ("method", "question", "relevant", "reader_ids", *RANKING_TYPES)
    optional = (*CORPUS_COLUMNS, "context_id", "k")
    adds = pa.schema({**RANKING_TYPES, "reader_ids": READER_TYPES["reader_ids"]})
    pool = "retrieve"

    @cached_property
    def retrieve(self) -> Retrieve:
        return Retrieve(self.resources)

    def __call__(self, batch: pa.Table) -> pa.Table:
        methods, relevant = batch.column("method").to_pylist(), batch.column("relevant").to_pylist()
        rows = [i for i, (m, r) in enumerate(zip(methods, relevant, strict=True)) if r == 0 and get_method(m).fallback]
        if not rows:
            return batch
        taken = pa.array(rows, pa.int64())
        again = batch.take(taken).drop_columns(list(RANKING_TYPES))
        fallbacks = [get_method(methods[i]).fallback for i in rows]
        again = self.retrieve(with_columns(again, {"method": pa.array(fallbacks, pa.string())}))
        out = {name: batch.column(name).to_pylist() for name in (*RANKING_TYPES, "reader_ids")}
        for j, i in enumerate(rows):
            for name in RANKING_TYPES:
                out[name][i] = again.column(name)[j].as_py()
            out["reader_ids"][i] = None
        types = {**RANKING_TYPES, "reader_ids": READER_TYPES["reader_ids"]}
        return with_columns(batch, {name: pa.array(values, types[name]) for name, values in out.items()})
