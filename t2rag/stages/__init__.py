"""The pipeline's stages, registered by the names methods use.

Rows enter as the plan makes them (`t2rag.pipeline.plan`): `id, subset, method, question, context_id` (gold id),
`gold_context` (its text, generated rows only), `reference`. Each stage adds the columns it documents:

| stage | reads | adds |
|---|---|---|
| hyde_prompts | question | messages_json, params_json |
| generate | messages_json, params_json | raw_output, prompt_tokens, completion_tokens, generation_s, |
| | | generation_error, finish_reason |
| hyde_query | raw_output, question | query_text, query_as_passage (drops the request and generation columns) |
| tokenize_queries | query_text or question, query_as_passage | query_token_ids (Ray, in front of GPU embedding) |
| embed_queries | query_text or question, query_as_passage, query_token_ids if present | query_vector |
| retrieve | question, query_vector, context_id, k | context_ids, scores, gold_rank |
| rerank | question, context_ids, context_id, k | context_ids, scores, gold_rank (reranked) |
| read_contexts | context_ids, gold_context, k | reader_texts |
| answer_prompts | question, reader_texts | messages_json, params_json, prompt_hash, table_text |
| parse_answers | raw_output, table_text, reference | formula, prediction_source, prediction, json_ok, formula_ok, |
| | | number_match, reasoning_steps |

`t2rag.pipeline.records.to_records` then keeps the record columns. Corpus-side stages: `tokenize_passages`
(text -> token_ids), `embed_passages` (text, token_ids if present -> vector) and `context_summary_prompts`
(text -> request columns).
"""

from __future__ import annotations

from t2rag.stages.answer import AnswerPrompts, ParseAnswers, ReadContexts
from t2rag.stages.base import Stage
from t2rag.stages.context_summaries import ContextSummaryPrompts
from t2rag.stages.embed import EmbedPassages, EmbedQueries, TokenizePassages, TokenizeQueries
from t2rag.stages.generate import Generate
from t2rag.stages.hyde import HydePrompts, HydeQuery
from t2rag.stages.rerank import Rerank
from t2rag.stages.retrieve import Retrieve

#: Every stage, in the order a row meets them (Ray places the stages of several methods' chains in this order).
STAGES: dict[str, type[Stage]] = {
    cls.name: cls
    for cls in (
        HydePrompts,
        Generate,
        HydeQuery,
        TokenizeQueries,
        EmbedQueries,
        Retrieve,
        Rerank,
        ReadContexts,
        AnswerPrompts,
        ParseAnswers,
        TokenizePassages,
        EmbedPassages,
        ContextSummaryPrompts,
    )
}

__all__ = ["STAGES", "Stage"]
