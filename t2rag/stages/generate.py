"""The generation stage: chat requests in, texts with token counts out, through the run's generator engine."""

from __future__ import annotations

import pyarrow as pa

from t2rag.generation.prefix import generate_shared
from t2rag.generation.requests import GENERATION_COLUMNS, REQUEST_COLUMNS, generation_columns, requests_of
from t2rag.stages.base import Stage, with_columns


class Generate(Stage):
    """`messages_json`, `params_json` -> `raw_output`, `prompt_tokens`, `completion_tokens`, `generation_s`,
    `generation_error`, `finish_reason`, `cached_prompt_tokens` (engine failures become errors on their rows, never
    a failed batch). With `generator.prefix_reuse` the batch's distinct prompts run once each, in prefix order."""

    name = "generate"
    reads = REQUEST_COLUMNS
    adds = pa.schema(GENERATION_COLUMNS)
    pool = "generate"

    def __call__(self, batch: pa.Table) -> pa.Table:
        reuse = self.resources.generator_config.prefix_reuse
        generations = generate_shared(self.resources.generator, requests_of(batch), reuse)
        return with_columns(batch, generation_columns(generations))
