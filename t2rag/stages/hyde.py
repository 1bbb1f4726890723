"""HyDE: the generator writes a hypothetical report excerpt for each question, and that excerpt is the dense query.

The method composes `hyde_prompts` -> `generate` -> `hyde_query` before the usual dense retrieval stages; the
template is t2rag/prompts/hyde.md and its length `prompts.hyde_max_tokens`.
"""

from __future__ import annotations

import pyarrow as pa

from t2rag.generation.requests import GENERATION_COLUMNS, REQUEST_COLUMNS, REQUEST_TYPES, free_text_requests
from t2rag.prompts import STAND_IN, Prompts, chars_of
from t2rag.stages.base import Stage, with_columns


class HydePrompts(Stage):
    """`question` -> `messages_json`, `params_json` asking for a hypothetical excerpt."""

    name = "hyde_prompts"
    reads = ("question",)
    adds = pa.schema(REQUEST_TYPES)

    @classmethod
    def planned_prompts(cls, prompts: Prompts, n: int, question_chars: int, contexts: int, context_chars: float
                        ) -> tuple[float, int]:  # fmt: skip
        return n * (chars_of(prompts.hyde(STAND_IN)) - len(STAND_IN)) + question_chars, prompts.config.hyde_max_tokens

    def __call__(self, batch: pa.Table) -> pa.Table:
        prompts = self.resources.prompts
        messages = [prompts.hyde(q) for q in batch.column("question").to_pylist()]
        requests = free_text_requests(self.resources.generator_config, messages, prompts.config.hyde_max_tokens)
        return with_columns(batch, requests)


class HydeQuery(Stage):
    """`raw_output` -> `query_text` (the question itself when generation failed) and `query_as_passage`;
    the generation and request columns are dropped so the answer stages start clean."""

    name = "hyde_query"
    reads = ("raw_output", "question")
    adds = pa.schema({"query_text": pa.string(), "query_as_passage": pa.bool_()})
    drops = (*GENERATION_COLUMNS, *REQUEST_COLUMNS)
    stateful = False

    def __call__(self, batch: pa.Table) -> pa.Table:
        docs = batch.column("raw_output").to_pylist()
        questions = batch.column("question").to_pylist()
        query = [d if d else q for d, q in zip(docs, questions, strict=True)]
        return with_columns(
            self.without_drops(batch),
            {
                "query_text": pa.array(query, pa.string()),
                "query_as_passage": pa.array([True] * batch.num_rows, pa.bool_()),
            },
        )
