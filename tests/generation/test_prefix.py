"""Shared-prefix scheduling: the order prompts run in, their routes, and each distinct prompt generated once."""

from __future__ import annotations

from collections.abc import Sequence

from t2rag.generation.base import ChatRequest, Generation, Generator, SamplingParams
from t2rag.generation.prefix import ROUTE_CHARS, generate_shared, prefix_order, route_key
from t2rag.prompts import Prompts


class Recording(Generator):
    """Answers each prompt with its user text and records what it was asked, in order."""

    engine = "recording"

    def __init__(self) -> None:
        self.asked: list[str] = []

    @property
    def model_id(self) -> str:
        return "recording"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        self.asked += [r.messages[-1]["content"] for r in requests]
        return [Generation(r.messages[-1]["content"], prompt_tokens=10, cached_prompt_tokens=3) for r in requests]


def _ask(text: str, max_tokens: int = 8) -> ChatRequest:
    return ChatRequest(({"role": "user", "content": text},), SamplingParams(max_tokens=max_tokens))


def test_prefix_order_puts_each_prompt_after_the_one_sharing_its_longest_prefix() -> None:
    keys = ["ctx B q1", "ctx A q2", "ctx B q2", "ctx A q1", "ctx A q2"]
    order = prefix_order(keys).tolist()
    assert [keys[i] for i in order] == ["ctx A q1", "ctx A q2", "ctx A q2", "ctx B q1", "ctx B q2"]
    assert order[1:3] == [1, 4]  # equal keys keep their order


def test_route_key_names_the_system_prompt_and_leading_context_not_the_question(sample) -> None:
    prompts = Prompts()
    contexts = sample.table.column("context").to_pylist()
    first, other = contexts[0], next(c for c in contexts if c[:ROUTE_CHARS] != contexts[0][:ROUTE_CHARS])
    assert len(prompts.answer("", [first])[1]["content"]) > ROUTE_CHARS  # the question lies beyond the route
    same = route_key(prompts.answer("What was revenue in 2008?", [first, other]))
    assert same == route_key(prompts.answer("And the margin in 2007?", [first]))
    assert same != route_key(prompts.answer("What was revenue in 2008?", [other, first]))


def test_each_distinct_request_runs_once_in_prefix_order_and_repeats_count_as_reused() -> None:
    engine = Recording()
    requests = [_ask("b"), _ask("a"), _ask("b"), _ask("a", max_tokens=9), _ask("c")]
    out = generate_shared(engine, requests, reuse=True)
    assert engine.asked == ["a", "a", "b", "c"]  # "b" once; "a" twice, as its sampling differs
    assert [g.text for g in out] == ["b", "a", "b", "a", "c"]
    assert [g.cached_prompt_tokens for g in out] == [3, 3, 10, 3, 3]  # the repeat reused all ten


def test_without_reuse_requests_go_as_given() -> None:
    engine = Recording()
    out = generate_shared(engine, [_ask("b"), _ask("a"), _ask("b")], reuse=False)
    assert engine.asked == ["b", "a", "b"]
    assert [g.cached_prompt_tokens for g in out] == [3, 3, 3]
