"""Grammar-first greedy sampling picks exactly the tokens of llama.cpp's own sampler chain (SmolLM2, real decoding),
and only options that change no logits take it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from t2rag.generation.grammar_first import _neutral_greedy, grammar_first
from t2rag.prompts import ANSWER_SCHEMA

FORMAT = {"type": "json_object", "schema": ANSWER_SCHEMA}
ASKED_FOR_JSON = [
    {
        "role": "system",
        "content": 'Reply as JSON: {"reasoning_steps": [...], "final_formula": ..., "computed_formula": ...}.',
    },
    {"role": "user", "content": "Revenue rose from 120 to 150. What is the growth in percent?"},
]
ASKED_FOR_PROSE = [  # the model's own first choice is prose, so the grammar has to mask the vocabulary
    {"role": "system", "content": "You are a friendly analyst. Answer in a full sentence."},
    {"role": "user", "content": "Costs fell from 80 to 60. By how much did they fall?"},
]


@pytest.fixture(scope="module")
def llm(smollm2_path: str) -> Iterator[Any]:
    from llama_cpp import Llama

    model = Llama(model_path=smollm2_path, n_ctx=1024, n_threads=2, verbose=False)
    yield model
    model.close()


def complete(llm: Any, messages: list[dict[str, str]], max_tokens: int = 96, **options: Any) -> dict[str, Any]:
    llm.reset()
    return llm.create_chat_completion(messages=messages, max_tokens=max_tokens, response_format=FORMAT, **options)


@pytest.mark.parametrize("messages", [ASKED_FOR_JSON, ASKED_FOR_PROSE], ids=["json", "prose"])
@pytest.mark.llm
@pytest.mark.slow
def test_same_tokens_as_the_sampler_chain(llm: Any, messages: list[dict[str, str]]) -> None:
    chain = complete(llm, messages, temperature=0.0)
    with grammar_first(llm) as used:
        fast = complete(llm, messages, temperature=0.0)
    assert fast["choices"][0]["message"]["content"] == chain["choices"][0]["message"]["content"]
    assert fast["usage"] == chain["usage"]
    [sampler] = used
    assert sampler.steps - fast["usage"]["completion_tokens"] in (0, 1)  # the end-of-text token is not counted
    if messages is ASKED_FOR_PROSE:
        assert sampler.masked_steps >= 1
    assert sampler.masked_steps < sampler.steps


@pytest.mark.llm
@pytest.mark.slow
def test_output_keeps_to_the_schema_when_the_model_wants_prose(llm: Any) -> None:
    # The answer schema with its strings and list bounded, so that every output the grammar allows closes within
    # max_tokens: unbounded, SmolLM2 repeats "1." inside a string until it runs out of tokens on some CPUs' builds.
    string = {"type": "string", "maxLength": 40}
    steps = {"type": "array", "items": string, "maxItems": 2}
    schema = {**ANSWER_SCHEMA, "properties": {"reasoning_steps": steps, "final_formula": string,
                                              "computed_formula": string}}  # fmt: skip
    assert schema["properties"].keys() == ANSWER_SCHEMA["properties"].keys()
    llm.reset()
    with grammar_first(llm):
        reply = llm.create_chat_completion(messages=ASKED_FOR_PROSE, max_tokens=400, temperature=0.0,
                                           response_format={"type": "json_object", "schema": schema})  # fmt: skip
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert set(ANSWER_SCHEMA["required"]) <= json.loads(reply["choices"][0]["message"]["content"]).keys()


@pytest.mark.llm
@pytest.mark.slow
def test_sampling_and_free_text_keep_the_chain(llm: Any) -> None:
    with grammar_first(llm) as used:
        complete(llm, ASKED_FOR_JSON, temperature=0.7, seed=1)
        llm.reset()
        llm.create_chat_completion(messages=ASKED_FOR_PROSE, max_tokens=8, temperature=0.0)
    assert used == []
    assert "_init_sampler" not in vars(llm)  # the instance is left as it was


@pytest.mark.parametrize(
    ("change", "neutral"),
    [({}, True), ({"repeat_penalty": 1.1}, False), ({"frequency_penalty": 0.5}, False),
     ({"presence_penalty": 0.5}, False), ({"temp": 0.7}, False), ({"logits_processor": object()}, False)],
)  # fmt: skip
def test_only_neutral_greedy_options_take_the_grammar_first_path(change: dict, neutral: bool) -> None:
    # Anything that changes the logits (a penalty, a processor) or samples must keep llama-cpp-python's chain:
    # the grammar-first path would silently drop it.
    options = {"temp": 0.0, "logits_processor": None, "repeat_penalty": 1.0, "frequency_penalty": 0.0,
               "presence_penalty": 0.0, **change}  # fmt: skip
    assert _neutral_greedy(options) is neutral
