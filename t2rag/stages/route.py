"""Query routing (t2rag.routing): which corpus a question of a routed method (`METHOD@ROUTER`) searches.

`route` ranks the loaded subsets for each question by its method's router (the oracle: the question's own subset;
semantic: the run's embedder, question against each subset's description; llm: the generator's reply to
`route_prompts`) and sets the row's `corpus` to the top one (or the top `routing.top`, or the pooled corpus); the
`pooled` router sets it to the pooled corpus with no ranking. Where the row has its question's `subset` (a run, not
a served question), the ranking is scored: routing accuracy and NDCG@3.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pyarrow as pa

from t2rag.data.corpus import POOLED
from t2rag.errors import ConfigError
from t2rag.generation.requests import GENERATION_COLUMNS, REQUEST_COLUMNS, REQUEST_TYPES, free_text_requests
from t2rag.methods import get_method
from t2rag.prompts import STAND_IN, Prompts, chars_of
from t2rag.routing.descriptions import descriptions_of
from t2rag.routing.rankings import llm_ranking, oracle_ranking, routing_scores, searched_corpus, semantic_rankings
from t2rag.stages.base import Stage, column, groups, set_rows, with_columns

ROUTE_TYPES: dict[str, pa.DataType] = {
    "corpus": pa.string(),
    "routed_subsets": pa.list_(pa.string()),
    "routing_acc": pa.bool_(),
    "routing_ndcg3": pa.float64(),
}


def require_two_subsets(methods: list[str], subsets: list[str]) -> None:
    """Refuse routed methods over fewer than two loaded subsets: there is nothing to route between."""
    routed = [m for m in methods if get_method(m).router]
    if routed and len(subsets) < 2:
        raise ConfigError(f"routing needs two or more subsets loaded; {', '.join(routed)} would route over "
                          f"{', '.join(subsets) or 'none'} alone")  # fmt: skip


class RoutingStage(Stage):
    """What both routing stages read: the loaded subsets and their descriptions."""

    @cached_property
    def loaded(self) -> list[str]:
        return list(self.resources.questions.subsets)

    @cached_property
    def descriptions(self) -> dict[str, str]:
        return descriptions_of(self.loaded, self.config.routing.descriptions)


class RoutePrompts(RoutingStage):
    """`question` -> `messages_json`, `params_json` asking the generator to rank the subsets (the LLM router)."""

    name = "route_prompts"
    reads = ("question",)
    adds = pa.schema(REQUEST_TYPES)

    @classmethod
    def planned_prompts(cls, prompts: Prompts, n: int, question_chars: int, contexts: int, context_chars: float
                        ) -> tuple[float, int]:  # fmt: skip
        shown = descriptions_of(["FinQA", "TAT-DQA"], {})  # the packaged descriptions of the benchmark's subsets
        each = chars_of(prompts.route(STAND_IN, shown)) - len(STAND_IN)
        return n * each + question_chars, prompts.config.route_max_tokens

    def __call__(self, batch: pa.Table) -> pa.Table:
        prompts = self.resources.prompts
        messages = [prompts.route(q, self.descriptions) for q in batch.column("question").to_pylist()]
        requests = free_text_requests(self.resources.generator_config, messages, prompts.config.route_max_tokens)
        return with_columns(batch, requests)


class Route(RoutingStage):
    """`method`, `question`, `subset` (the question's, optional), `raw_output` (the LLM router's reply, optional) ->
    `corpus` (what the row searches), `routed_subsets` (the router's ranking), `routing_acc`, `routing_ndcg3`
    (null without the question's subset, and for the unrouted pooled search); the generation and request columns
    of the LLM router are dropped so the answer stages start clean."""

    name = "route"
    reads = ("method", "question")
    optional = ("subset", "raw_output")
    adds = pa.schema(ROUTE_TYPES)
    drops = (*GENERATION_COLUMNS, *REQUEST_COLUMNS)
    pool = "embed"  # the semantic router embeds with the run's embedder

    @cached_property
    def description_vectors(self) -> np.ndarray:
        return self.resources.embedder.embed_passages(list(self.descriptions.values()))

    def __call__(self, batch: pa.Table) -> pa.Table:
        n = batch.num_rows
        out: dict[str, list] = {name: [None] * n for name in ROUTE_TYPES}
        questions = batch.column("question").to_pylist()
        subsets = column(batch, "subset")
        replies = column(batch, "raw_output")
        for (method_name,), rows in groups(batch, "method"):
            router = get_method(method_name).router
            if router is None:
                raise ValueError(f"route: method {method_name} has no router")
            if router == "pooled":
                set_rows(out["corpus"], rows, [POOLED] * len(rows))
                continue
            rankings = self._rankings(router, rows, questions, subsets, replies)
            top = self.config.routing.top
            set_rows(out["routed_subsets"], rows, rankings)
            set_rows(out["corpus"], rows, [searched_corpus(r, top, self.loaded) for r in rankings])
            for i, ranking in zip(rows.tolist(), rankings, strict=True):
                if subsets[i] is not None:
                    out["routing_acc"][i], out["routing_ndcg3"][i] = routing_scores(ranking, subsets[i])
        return with_columns(self.without_drops(batch), {k: pa.array(v, ROUTE_TYPES[k]) for k, v in out.items()})

    def _rankings(self, router: str, rows: np.ndarray, questions: list, subsets: list, replies: list) -> list:
        if router == "oracle":
            if any(subsets[i] is None for i in rows):
                raise ValueError("the oracle router needs each question's subset, which a served question has not")
            return [oracle_ranking(subsets[i], self.loaded) for i in rows]
        if router == "semantic":
            vectors = self.resources.embedder.embed_queries([questions[i] for i in rows])
            return semantic_rankings(np.asarray(vectors), np.asarray(self.description_vectors), self.loaded)
        return [llm_ranking(replies[i], self.loaded)[0] for i in rows]
