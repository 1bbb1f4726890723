"""The generation stage: chat requests in, texts with token counts out, through the run's generator engine."""

from __future__ import annotations

import pyarrow as pa

from t2rag.generation.requests import GENERATION_COLUMNS, REQUEST_COLUMNS, generation_columns, requests_of
from t2rag.stages.base import Stage, with_columns


class Generate(Stage):
    """`messages_json`, `params_json` -> `raw_output`, `prompt_tokens`, `completion_tokens`, `generation_s`,
    `generation_error` (engine failures become errors on their rows, never a failed batch)."""

    name = "generate"
    reads = REQUEST_COLUMNS
    adds = pa.schema(GENERATION_COLUMNS)
    pool = "generate"

    def __call__(self, batch: pa.Table) -> pa.Table:
        generations = self.resources.generator.generate(requests_of(batch))
        return with_columns(batch, generation_columns(generations))
