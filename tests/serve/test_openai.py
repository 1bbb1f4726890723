"""The served RAG through the official `openai` client, unchanged, and through LangChain's ChatOpenAI.

The app is the rag app `test_app.py` also drives (`rag_app` in tests/serve/conftest.py): the first 100 FinQA
questions of the bundled sample with bm25, base, pretrained_only and oracle, SmolLM2-135M (llama.cpp) as the
generator, 4 contexts by default, behind an API key.
"""

from __future__ import annotations

import math
import time

import httpx
import openai
import pytest

from t2rag.answer.readable import number_text
from tests.serve.conftest import DEFAULT_K, KEY, SUBSET, wait_until_running

pytestmark = [pytest.mark.slow, pytest.mark.llm]


@pytest.fixture(scope="module")
def served(rag_app, rag_settings, rag_questions) -> dict:
    """The shared rag app, running, and the first three of its questions."""
    wait_until_running(["rag"], timeout_s=300)
    return {"url": rag_app, "questions": rag_questions[:3], "settings": rag_settings}


@pytest.fixture(scope="module")
def client(served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served['url']}/v1", api_key=KEY, max_retries=0, timeout=180)


def _ask(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def test_models_are_the_served_methods(client):
    ids = [m.id for m in client.models.list()]
    assert ids == ["pretrained_only", "bm25", "base"]  # oracle needs a context id: not listed


def test_a_chat_completion_answers_with_the_rag_parts_beside(client, served):
    question = served["questions"][0]["question"]
    reply = client.chat.completions.create(model="bm25", messages=_ask(question), temperature=0)
    choice = reply.choices[0]
    assert reply.object == "chat.completion" and reply.model == "bm25"
    assert choice.message.role == "assistant" and "Answer: " in choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.prompt_tokens_details.cached_tokens == 0  # the served llama.cpp evaluates each prompt afresh
    rag = reply.model_extra["t2rag"]
    assert rag["method"] == "bm25" and rag["corpus"] == SUBSET and len(rag["contexts"]) == DEFAULT_K
    assert all(c["subset"] == SUBSET and "text" not in c for c in rag["contexts"])
    # The reply ends with the parsed answer, whether or not a number could be read.
    stated = choice.message.content.rstrip().rsplit("Answer: ", 1)[-1]
    if rag.get("prediction") is None:
        assert stated == "no number could be read"
    else:
        assert stated.split(" (formula: ")[0] == number_text(rag["prediction"])


def test_the_streamed_reply_is_the_reply_in_pieces(client, served):
    question = served["questions"][1]["question"]
    whole = client.chat.completions.create(model="bm25", messages=_ask(question), temperature=0)
    started = time.monotonic()
    arrivals, pieces, extensions, finish = [], [], [], None
    stream = client.chat.completions.create(
        model="bm25", messages=_ask(question), temperature=0, stream=True, stream_options={"include_usage": True}
    )
    usage = None
    for event in stream:
        arrivals.append(time.monotonic() - started)
        if event.model_extra.get("t2rag"):
            extensions.append(event.model_extra["t2rag"])
        if event.usage is not None:
            usage = event.usage
        for choice in event.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    assert len(pieces) >= 2
    assert "".join(pieces) == whole.choices[0].message.content  # greedy decoding: the same answer
    assert finish == whole.choices[0].finish_reason and usage is not None and usage.completion_tokens > 0
    assert arrivals[0] < arrivals[-1] - 0.5  # the first chunk (with the contexts) comes before generation ends
    assert len(extensions[0]["contexts"]) == DEFAULT_K and "prediction_source" in extensions[-1]


def test_max_tokens_one_is_cut_at_length(client, served):
    reply = client.chat.completions.create(
        model="base", messages=_ask(served["questions"][0]["question"]), max_tokens=1
    )
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 1


def test_oracle_takes_its_context_in_the_extension(client, served):
    row = served["questions"][0]
    reply = client.chat.completions.create(
        model="oracle", messages=_ask(row["question"]), extra_body={"t2rag": {"context_id": row["context_id"]}}
    )
    assert [c["context_id"] for c in reply.model_extra["t2rag"]["contexts"]] == [row["context_id"]]
    with pytest.raises(openai.NotFoundError, match=r"oracle needs t2rag\.context_id"):
        client.chat.completions.create(model="oracle", messages=_ask(row["question"]))


def test_errors_are_openais_and_map_to_the_sdks_classes(client, served):
    question = _ask(served["questions"][0]["question"])
    with pytest.raises(openai.NotFoundError) as unknown:
        client.chat.completions.create(model="gpt-4o", messages=question)
    assert unknown.value.code == "model_not_found" and unknown.value.param == "model"
    with pytest.raises(openai.BadRequestError) as many:
        client.chat.completions.create(model="bm25", messages=question, n=2)
    assert many.value.param == "n"
    with pytest.raises(openai.BadRequestError, match="logprobs"):
        client.chat.completions.create(model="bm25", messages=question, logprobs=True)
    with pytest.raises(openai.BadRequestError, match="last message must be the user's"):
        client.chat.completions.create(model="bm25", messages=[*question, {"role": "assistant", "content": "hm"}])
    body = httpx.post(f"{served['url']}/v1/chat/completions", json={"model": "bm25"}, headers=_auth(KEY)).json()
    assert (
        set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["type"] == "invalid_request_error"
    )


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.mark.parametrize("key", [None, "wrong"])
def test_one_key_guards_every_route(served, key):
    # Without a key: the header is sent empty (the client itself insists on having one to send).
    headers = {} if key else {"Authorization": ""}
    bad = openai.OpenAI(base_url=f"{served['url']}/v1", api_key=key or "unused", default_headers=headers, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="bm25", messages=_ask("What was revenue?"))
    headers = _auth(key) if key else {}
    for path in ("/retrieve", "/answer", "/generate", "/v1/chat/completions", "/llm/v1/chat/completions"):
        assert httpx.post(f"{served['url']}{path}", json={}, headers=headers).status_code == 401, path
    # The generator has no route of its own: with the key, the old LLM app's path does not exist.
    assert httpx.get(f"{served['url']}/llm/v1/models", headers=_auth(KEY)).status_code == 404


def test_the_chat_route_ranks_and_answers_as_the_core(client, served):
    """Same rankings as the batch runners's stages; the same generation as /answer (greedy), parsed as the batch
    engine's `parse_answers` parses it."""
    import pyarrow as pa

    from serve.retrieval import index_lock
    from t2rag.methods import get_method
    from t2rag.pipeline.local import LocalRunner

    questions = [q["question"] for q in served["questions"]]
    engine = LocalRunner(served["settings"].run_config())
    with index_lock(engine.config):
        batch = pa.table({"question": questions, "subset": [SUBSET] * 3, "method": ["bm25"] * 3})
        ranked = engine.apply(get_method("bm25").stages, batch).column("context_ids").to_pylist()
    for question, ids in zip(questions, ranked, strict=True):
        rag = client.chat.completions.create(model="bm25", messages=_ask(question)).model_extra["t2rag"]
        assert [c["context_id"] for c in rag["contexts"]] == ids[:DEFAULT_K]
        answer = httpx.post(
            f"{served['url']}/answer", json={"method": "bm25", "question": question}, headers=_auth(KEY), timeout=180
        ).json()
        assert rag["raw_output"] == answer["raw_output"]
        retrieved = httpx.post(
            f"{served['url']}/retrieve",
            json={"method": "bm25", "question": question, "with_text": True},
            headers=_auth(KEY),
            timeout=60,
        ).json()
        table_text = "\n\n".join(c["text"] for c in retrieved["contexts"])
        batch = pa.table({"raw_output": [rag["raw_output"]], "table_text": [table_text]})
        parsed = engine.apply(("parse_answers",), batch).to_pylist()[0]
        finite = parsed["prediction"] is not None and math.isfinite(parsed["prediction"])
        batch_prediction = parsed["prediction"] if finite else None
        assert rag.get("prediction") == answer["prediction"] == batch_prediction
        assert rag.get("formula") == parsed["formula"] and rag.get("prediction_source") == parsed["prediction_source"]


def test_langchain_chat_openai_drives_the_served_rag(served):
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=f"{served['url']}/v1", api_key=KEY, model="bm25", temperature=0, max_retries=0)
    reply = chat.invoke(served["questions"][2]["question"])
    assert "Answer: " in reply.content
    assert reply.response_metadata["finish_reason"] in ("stop", "length")
