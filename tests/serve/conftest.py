"""The Serve tests' cluster and the RAG app two modules share on it.

One local Ray with Serve on loopback, kept for every test that asks for it (`tests/kept_cluster.py`: they run last,
one after another), and one `rag` app on it for `test_app.py` (its routes, errors and faults) and `test_openai.py`
(the OpenAI-compatible route through the official clients): deploying it once spares a second Ingress and
Generator, each loading its models.
"""

from __future__ import annotations

import time

import pytest

from tests.serve import serve_on_loopback

SUBSET = "FinQA"
#: The rag app serves the first ROWS FinQA questions of the bundled sample (94 contexts: the dense index builds in
#: seconds).
ROWS = 100
#: The bearer key the rag app requires.
KEY = "test-key-of-the-served-rag"
#: How many of the rag app's questions its tests ask (`rag_questions`).
QUESTION_COUNT = 4
#: How many contexts the rag app retrieves for a request without k (its run config's retrieval.k, not the schema's 3).
DEFAULT_K = 4


@pytest.fixture(scope="session")
def serve_url(cluster_keeper) -> str:
    """The base URL of Serve's proxy on the kept cluster. Session-scoped: its tests run last, together, so the
    keeper holds this cluster from the first of them to the session's end; a module deletes the apps it deployed."""
    return cluster_keeper.enter("serve", serve_on_loopback)


@pytest.fixture(scope="session")
def rag_settings(tmp_path_factory, short_system_prompt):
    """The rag app's settings: bm25, base, pretrained_only and oracle over the first ROWS FinQA questions, SmolLM2-135M
    (llama.cpp) as the generator with a short system prompt and contexts cut to 400 characters (the wiring is under
    test, not answer quality), DEFAULT_K contexts by default, a 2 s body timeout, behind KEY."""
    from pydantic import SecretStr

    from serve.settings import ServeSettings
    from tests.conftest import real_table, write_layout

    data = write_layout(tmp_path_factory.mktemp("finqa"), {SUBSET: real_table(SUBSET).slice(0, ROWS)})
    return ServeSettings(
        data=str(data),
        subsets=[SUBSET],
        methods=["pretrained_only", "oracle", "bm25", "base"],
        generator={"preset": "smollm2-135m", "n_ctx": 2048, "n_threads": 1, "sampling": {"max_tokens": 48}},
        overrides={
            "prompts": {"max_context_chars": 400, "answer_system": short_system_prompt},
            "retrieval": {"k": DEFAULT_K},
        },
        retrieval_timeout_s=20,
        generation_timeout_s=120,
        body_timeout_s=2,
        api_key=SecretStr(KEY),
    )


@pytest.fixture(scope="session")
def rag_questions(rag_settings) -> list[dict]:
    """The first QUESTION_COUNT scored questions the rag app serves: their text and gold context id."""
    from t2rag.data import load_questions

    rows = load_questions(rag_settings.data, [SUBSET]).scored().slice(0, QUESTION_COUNT).to_pylist()
    return [{"question": r["question"], "context_id": r["context_id"]} for r in rows]


@pytest.fixture(scope="session")
def rag_app(serve_url, rag_settings) -> str:
    """The rag app deployed on the kept cluster (without waiting for it: a module starts what else it needs, then
    waits with `wait_until_running`); returns the base URL. It goes with the cluster (Serve's shutdown)."""
    from ray import serve

    from serve.app import compose

    serve.run_many([serve.RunTarget(compose(rag_settings), name="rag", route_prefix="/")],
                   wait_for_applications_running=False)  # fmt: skip
    return serve_url


def wait_until_running(names: list[str], timeout_s: float) -> None:
    """Wait until Serve runs every named app; fails at once on a failed deploy."""
    from ray import serve

    deadline = time.monotonic() + timeout_s
    while True:
        apps = serve.status().applications
        states = {name: apps[name].status if name in apps else "MISSING" for name in names}
        if all(state == "RUNNING" for state in states.values()):
            return
        failed = {n: apps[n].message for n, s in states.items() if s == "DEPLOY_FAILED"}
        assert not failed, f"deploy failed: {failed}"
        assert time.monotonic() < deadline, f"not running after {timeout_s} s: {states}"
        time.sleep(0.5)
