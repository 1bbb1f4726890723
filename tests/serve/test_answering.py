"""A chat's prompt as the generator receives it: the client's sampling parameters, system text and earlier turns."""

from __future__ import annotations

import json

import pytest

from serve.answering import Answering
from serve.openai_api import ChatCompletionRequest
from t2rag.config import load_config
from t2rag.generation.base import SamplingParams
from t2rag.generation.registry import resolve_generator
from t2rag.methods import get_method
from t2rag.resources import Resources


@pytest.fixture(scope="module")
def prepared():
    resources = Resources(load_config(None, {"methods": ["oracle"], "generator": "smollm2-135m"}))
    answering = Answering(resources)
    corpus = resources.questions.subsets[0]
    docs = resources.corpus(corpus)
    gold = answering.gold_context(docs.context_ids[0], corpus)
    return answering.prompt(get_method("oracle"), corpus, "What was the revenue?", 3, [], gold, {}, 0.0)


def test_a_chats_parameters_and_system_text_reach_the_generator(prepared):
    body = ChatCompletionRequest.model_validate({
        "model": "oracle", "temperature": 0.4, "top_p": 0.9, "max_tokens": 77, "seed": 5, "stop": ["\n\n"],
        "messages": [{"role": "system", "content": "Answer in euros."}, {"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "What was the revenue?"}],
    })  # fmt: skip
    chat = prepared.for_chat(body, resolve_generator("smollm2-135m"))
    params = SamplingParams.model_validate_json(chat.request["params_json"])
    assert (params.temperature, params.top_p, params.max_tokens, params.seed, params.stop) == (0.4, 0.9, 77, 5,
                                                                                               ("\n\n",))  # fmt: skip
    messages = json.loads(chat.request["messages_json"])
    assert messages[0]["role"] == "system" and messages[0]["content"].endswith("\n\nAnswer in euros.")
    assert [m["content"] for m in messages[1:3]] == ["Hi", "Hello"]
    assert "What was the revenue?" in messages[-1]["content"]


def test_without_parameters_the_generators_own_sampling_holds(prepared):
    body = ChatCompletionRequest.model_validate({"model": "oracle", "messages": [{"role": "user", "content": "Q?"}]})
    generator = resolve_generator({"preset": "smollm2-135m", "sampling": {"temperature": 0.2, "top_p": 0.8}})
    chat = prepared.for_chat(body, generator)
    params = SamplingParams.model_validate_json(chat.request["params_json"])
    assert (params.temperature, params.top_p) == (0.2, 0.8)
    assert json.loads(chat.request["messages_json"]) == json.loads(prepared.request["messages_json"])
