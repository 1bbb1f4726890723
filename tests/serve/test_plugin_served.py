"""`t2rag serve --config` with plugins, as a user starts it: the installed example's `tfidf_focus` and a module's
`overlap` (beside the config) on /retrieve, /answer and the chat route, queried with the official openai client."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
import yaml

from tests.conftest import PLUGIN_MODULES, free_port, real_table, stop_started, with_example, write_layout

pytestmark = [pytest.mark.slow, pytest.mark.llm]

QUESTIONS = 40


@pytest.fixture(scope="module")
def served(cluster_keeper, example_installed, short_system_prompt, tmp_path_factory) -> Iterator[str]:
    """The base URL of `t2rag serve` on the first QUESTIONS FinQA questions, SmolLM2-135M answering."""
    cluster_keeper.close()  # the command starts a local cluster of its own
    folder = tmp_path_factory.mktemp("served")
    shutil.copy(PLUGIN_MODULES / "word_overlap.py", folder)
    data = write_layout(folder / "sample", {"FinQA": real_table("FinQA").slice(0, QUESTIONS)})
    fields = {
        "data": {"source": str(data)},
        "plugins": ["word_overlap"],
        "methods": ["tfidf_focus", "overlap"],
        "generator": {"preset": "smollm2-135m", "n_ctx": 2048, "n_threads": 1, "sampling": {"max_tokens": 32}},
        "prompts": {"max_context_chars": 400, "answer_system": short_system_prompt},
    }
    (folder / "served.yaml").write_text(yaml.safe_dump(fields))
    port = free_port()
    command = [sys.executable, "-m", "t2rag.cli", "serve", "--config", "served.yaml", "--port", str(port)]
    log = folder / "serve.log"
    env = {**os.environ, **with_example(example_installed)}
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=folder, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while f"serving on http://127.0.0.1:{port}" not in log.read_text():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"not up (exit {process.poll()}):\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_started(process, 60)


def test_plugin_methods_are_served_like_built_ins(served):
    listed = httpx.get(f"{served}/methods", timeout=30).json()
    served_methods = [m["name"] for m in listed["methods"]]
    assert served_methods[-2:] == ["tfidf_focus", "overlap"]  # after the answer-only methods a generator serves
    question = real_table("FinQA").slice(0, 1).to_pylist()[0]
    ranked = httpx.post(f"{served}/retrieve", json={"question": question["question"], "method": "tfidf_focus", "k": 3},
                        timeout=60)  # fmt: skip
    assert ranked.status_code == 200, ranked.text
    assert len(ranked.json()["contexts"]) == 3
    answered = httpx.post(f"{served}/answer", json={"question": question["question"], "method": "overlap", "k": 2},
                          timeout=300)  # fmt: skip
    assert answered.status_code == 200, answered.text
    assert answered.json()["method"] == "overlap" and len(answered.json()["contexts"]) == 2

    client = openai.OpenAI(base_url=f"{served}/v1", api_key="unused", max_retries=0, timeout=300)
    assert {"tfidf_focus", "overlap"} <= {m.id for m in client.models.list()}
    reply = client.chat.completions.create(model="tfidf_focus", temperature=0,
                                           messages=[{"role": "user", "content": question["question"]}])  # fmt: skip
    assert reply.model == "tfidf_focus" and "Answer: " in reply.choices[0].message.content
