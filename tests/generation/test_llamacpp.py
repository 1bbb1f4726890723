"""The in-process llama.cpp engine on the packaged SmolLM2-135M-Instruct model (real generation)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator

import pytest

from t2rag.generation.base import ChatRequest, SamplingParams, is_rejected
from t2rag.generation.cache import CachedGenerator, GenerationCache
from t2rag.generation.llamacpp import LlamaCppConfig, LlamaCppGenerator
from t2rag.generation.registry import build_generator
from t2rag.prompts import ANSWER_SCHEMA

pytestmark = [pytest.mark.llm, pytest.mark.slow]

SYSTEM = {"role": "system", "content": "You are a concise financial analyst. Answer in one sentence."}
JSON_SYSTEM = {
    "role": "system",
    "content": 'Answer with JSON like {"reasoning_steps": ["growth = (new - old) / old"], '
    '"final_formula": "(120 - 100) / 100", "computed_formula": "0.2"}.',
}


def ask(question: str, max_tokens: int = 48, **params: object) -> ChatRequest:
    messages = (SYSTEM, {"role": "user", "content": question})
    return ChatRequest(messages, SamplingParams(max_tokens=max_tokens, **params))


@pytest.fixture(scope="module")
def generator(smollm2_path: str) -> Iterator[LlamaCppGenerator]:
    engine = LlamaCppGenerator(LlamaCppConfig(model="smollm2-135m", n_ctx=2048, n_threads=2))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def small_window(smollm2_path: str) -> Iterator[LlamaCppGenerator]:
    engine = LlamaCppGenerator(LlamaCppConfig(model="smollm2-135m", n_ctx=256, n_threads=2))
    yield engine
    engine.close()


def test_construction_is_cheap_and_model_id_is_the_file_name(smollm2_path: str) -> None:
    engine = build_generator(LlamaCppConfig(model="smollm2-135m"), cache=False)
    assert isinstance(engine, LlamaCppGenerator)
    assert engine._llm is None  # nothing loaded until the first generate
    assert engine.model_id == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert LlamaCppGenerator(LlamaCppConfig(model=smollm2_path)).model_id == engine.model_id


def test_generates_a_batch_with_token_counts(generator: LlamaCppGenerator, caplog: pytest.LogCaptureFixture) -> None:
    requests = [ask("What is revenue?"), ask("What is 12 plus 30?"), ask("Define net income.")]
    with caplog.at_level(logging.INFO, logger="t2rag.generation.llamacpp"):
        results = generator.generate(requests)
    assert len(results) == 3
    for result in results:
        assert result.error is None
        assert result.text.strip()
        assert result.prompt_tokens > 0
        assert 0 < result.completion_tokens <= 48
        assert result.seconds > 0
        assert not result.cached
    assert [generator.count_prompt_tokens(r.messages) for r in requests] == [g.prompt_tokens for g in results]
    assert any("3 requests" in r.getMessage() and "tok/s" in r.getMessage() for r in caplog.records)
    assert generator.generate([]) == []


def test_json_schema_constrains_the_output(generator: LlamaCppGenerator) -> None:
    request = ChatRequest(
        (JSON_SYSTEM, {"role": "user", "content": "Profit fell from 50 to 40. What is the change in percent?"}),
        SamplingParams(max_tokens=200, json_schema=ANSWER_SCHEMA),
    )
    [result] = generator.generate([request])
    assert result.error is None
    answer = json.loads(result.text)
    assert set(ANSWER_SCHEMA["required"]) <= answer.keys()
    assert isinstance(answer["reasoning_steps"], list)


def test_greedy_decoding_is_deterministic(generator: LlamaCppGenerator) -> None:
    request = ask("Name one stock exchange.", temperature=0.0)
    first, _, second = generator.generate([request, ask("What is a bond?"), request])
    assert first.error is None and second.error is None
    assert first.text == second.text
    assert first.completion_tokens == second.completion_tokens


def test_overlong_prompt_is_an_error_entry_and_the_batch_continues(small_window: LlamaCppGenerator) -> None:
    long_question = " ".join(["revenue"] * 2000)
    requests = [ask("What is EBITDA?", max_tokens=16), ask(long_question), ask("What is a dividend?", max_tokens=16)]
    short, overlong, after = small_window.generate(requests)
    assert short.error is None and short.text
    assert after.error is None and after.text
    assert overlong.text == ""
    assert overlong.error is not None
    assert overlong.error.startswith("request rejected: prompt of ")
    assert is_rejected(overlong.error) and "exceeds the context window of 256" in overlong.error
    # The prompt fits, but not with its completion budget.
    [budget] = small_window.generate([ask("What is EBITDA?", max_tokens=250)])
    assert budget.error is not None and "context window of 256" in budget.error


def test_close_frees_and_reloads_on_demand(small_window: LlamaCppGenerator) -> None:
    small_window.close()
    assert small_window._llm is None
    [result] = small_window.generate([ask("Say hi.", max_tokens=8)])
    assert result.error is None and result.text


def test_cache_serves_repeats_and_skips_errors(small_window: LlamaCppGenerator, tmp_path) -> None:
    cached = CachedGenerator(small_window, GenerationCache(tmp_path / "c.sqlite"))
    requests = [ask("What is a balance sheet?", max_tokens=24), ask(" ".join(["cash"] * 2000))]
    started = time.perf_counter()
    first = cached.generate(requests)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    second = cached.generate(requests)
    second_s = time.perf_counter() - started

    assert first[0].error is None and not first[0].cached
    assert second[0].cached and second[0].text == first[0].text
    assert second[0].completion_tokens == first[0].completion_tokens
    assert second[1].error is not None and not second[1].cached  # errors are retried, never cached
    keys = [r.key(small_window.engine, small_window.model_id) for r in requests]
    assert set(cached.cache.get_many(keys)) == {keys[0]}
    assert second_s < first_s / 2
    cached.cache.close()


def _prompt_ids(engine: LlamaCppGenerator, request: ChatRequest) -> list[int]:
    """The tokens llama.cpp feeds the model for a request (its chat template, special tokens read as such)."""
    prompt = engine._formatter(messages=list(request.messages)).prompt
    return list(engine._llm.tokenize(prompt.encode("utf-8"), special=True))


def test_cached_prompt_tokens_are_the_prefix_llama_cpp_kept(generator: LlamaCppGenerator) -> None:
    report = "Revenue rose from 100 in 2007 to 120 in 2008, and costs fell from 80 to 70. " * 12
    first, second = ask(report + "What was the revenue growth?", 4), ask(report + "How much did costs fall?", 4)
    generator.generate([ask("Unrelated.", 4)])
    a, b, again = generator.generate([first, second, second])
    shared = next(i for i, (x, y) in enumerate(zip(_prompt_ids(generator, first), _prompt_ids(generator, second),
                                                   strict=False)) if x != y)  # fmt: skip
    assert shared > 150  # the system prompt and the report
    assert a.cached_prompt_tokens < 30  # only the chat template's start is shared with the unrelated prompt
    assert b.cached_prompt_tokens == shared
    assert again.cached_prompt_tokens == again.prompt_tokens - 1  # held whole; one token replayed for its logits


def test_without_the_prompt_cache_nothing_is_reused(smollm2_path: str) -> None:
    engine = LlamaCppGenerator(LlamaCppConfig(model="smollm2-135m", n_ctx=1024, n_threads=2, prompt_cache=False))
    try:
        results = engine.generate([ask("What is revenue?", 4), ask("What is revenue?", 4)])
        assert [g.cached_prompt_tokens for g in results] == [0, 0]
        assert results[1].prompt_tokens > 10
    finally:
        engine.close()
