"""`t2rag serve --config` with plugins, as a user starts it: the installed example's `tfidf_focus` and reranker
(`focus_tfidf_rerank`), a module's `overlap` and a dense module's `cosine_bonus` (beside the config) on /retrieve,
/answer and the chat route, queried with the official openai client; the served rankings are those of `t2rag eval`
on the same config."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from t2rag.run_folder.files import read_records
from tests.conftest import PLUGIN_MODULES, free_port, real_table, stop_started, t2rag, with_example, write_layout

pytestmark = [pytest.mark.slow, pytest.mark.llm]

QUESTIONS = 40
#: The methods whose served rankings are checked against a run's.
RANKED = ["cosine_bonus", "focus_tfidf_rerank"]


@dataclass
class Served:
    url: str
    folder: Path  # the config's folder, with the plugin modules beside it
    env: dict[str, str]  # the environment the app was started in (the example installed)


@pytest.fixture(scope="module")
def served(cluster_keeper, example_installed, short_system_prompt, tmp_path_factory) -> Iterator[Served]:
    """The base URL of `t2rag serve` on the first QUESTIONS FinQA questions, SmolLM2-135M answering."""
    cluster_keeper.close()  # the command starts a local cluster of its own
    folder = tmp_path_factory.mktemp("served")
    shutil.copy(PLUGIN_MODULES / "word_overlap.py", folder)
    shutil.copy(PLUGIN_MODULES / "cosine_bonus.py", folder)
    data = write_layout(folder / "sample", {"FinQA": real_table("FinQA").slice(0, QUESTIONS)})
    fields = {
        "data": {"source": str(data)},
        "plugins": ["word_overlap", "cosine_bonus"],
        "methods": ["tfidf_focus", "overlap", *RANKED],
        "settings": {"cosine_bonus": {"bonus": 0.25}},
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
        yield Served(f"http://127.0.0.1:{port}", folder, env)
    finally:
        stop_started(process, 60)


def test_plugin_methods_are_served_like_built_ins(served):
    served = served.url
    listed = httpx.get(f"{served}/methods", timeout=30).json()
    served_methods = [m["name"] for m in listed["methods"]]
    assert served_methods[-4:] == ["tfidf_focus", "overlap", *RANKED]  # after the answer-only methods
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


def test_a_dense_plugin_and_a_reranker_rank_served_as_in_a_run(served):
    """/retrieve of cosine_bonus (query vectors from the replica's embedder, passage vectors from the app's index)
    and of the example's reranker gives each question the top 3 that `t2rag eval` of the same config ranks."""
    config = yaml.safe_load((served.folder / "served.yaml").read_text())
    run = served.folder / "run"
    fields = {**config, "methods": RANKED, "retrieval_only": True, "out": str(run)}
    (served.folder / "run.yaml").write_text(yaml.safe_dump(fields))
    done = t2rag("eval", "--config", "run.yaml", cwd=served.folder, env=served.env)
    assert done.returncode == 0, done.stderr[-2000:]
    records = read_records(str(run), ["id", "method", "context_ids", "scores"]).to_pylist()
    questions = {r["id"]: r["question"] for r in real_table("FinQA").slice(0, QUESTIONS).to_pylist()}
    for r in [r for r in records if r["method"] in RANKED][:: QUESTIONS // 5]:
        reply = httpx.post(f"{served.url}/retrieve", json={"question": questions[r["id"]], "method": r["method"],
                                                           "k": 3}, timeout=60)  # fmt: skip
        assert reply.status_code == 200, reply.text
        contexts = reply.json()["contexts"]
        assert [c["context_id"] for c in contexts] == r["context_ids"][:3], (r["method"], r["id"])
        assert [c["score"] for c in contexts] == pytest.approx(r["scores"][:3], abs=1e-5)
