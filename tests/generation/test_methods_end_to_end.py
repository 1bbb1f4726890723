"""Every registered method, end to end with real generation: SmolLM2 in process and through llama.cpp's server."""

from __future__ import annotations

import json

import pytest

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.methods import METHODS
from t2rag.pipeline.local import run_local
from t2rag.run_folder.files import read_records

pytestmark = [pytest.mark.slow, pytest.mark.llm]

ALL_METHODS = list(METHODS)


def _config(data, out, generator, reranker, system_prompt):
    return load_config(
        None,
        {
            "data": {"source": data, "subsets": ["FinQA"]},
            "methods": ALL_METHODS,
            "generator": generator,
            "retrieval": {"reranker": reranker},
            "prompts": {
                "max_context_chars": 250,
                "summary_max_tokens": 16,
                "hyde_max_tokens": 16,
                "answer_system": system_prompt,
            },
            "limit": 1,
            "seed": 3,
            "out": str(out),
        },
    )


def _check_run(result, out, data, capsys):
    methods = result["methods"]
    assert list(methods) == ALL_METHODS
    for name, scorecard in methods.items():
        weighted = scorecard["weighted"]
        assert weighted["generated"] == 1, name  # the seeded sample of one question
        assert 0.0 <= weighted["number_match"] <= 100.0
        assert ("mrr@3" in weighted) == METHODS[name].retrieves, name
    records = read_records(str(out)).to_pydict()
    generated = [i for i, raw in enumerate(records["raw_output"]) if raw is not None]
    assert len(generated) == len(ALL_METHODS)
    assert all(records["generation_error"][i] is None for i in generated)
    assert all(records["raw_output"][i].strip() for i in generated)
    # Constrained decoding: every answer starts as a JSON object (24 tokens cut most of SmolLM2's short).
    assert all(records["raw_output"][i].lstrip().startswith("{") for i in generated)
    assert all(records["prompt_tokens"][i] > 0 and records["completion_tokens"][i] > 0 for i in generated)
    # `t2rag score` on the written records gives the same numbers.
    assert main(["score", "--data", data, "--predictions", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["methods"] == methods


def test_every_method_in_process(tiny_data, minilm_reranker, short_system_prompt, tmp_path, capsys):
    generator = {"preset": "smollm2-135m", "n_ctx": 4096, "sampling": {"max_tokens": 24}}
    config = _config(tiny_data, tmp_path / "run", generator, minilm_reranker, short_system_prompt)
    result = run_local(config)
    _check_run(result, tmp_path / "run", tiny_data, capsys)
    assert result["model_loads"]["smollm2-135m"] == 1  # one engine for summaries, HyDE and every answer
    # Summaries were generated once and stored: a second run over the same corpus reuses them.
    from t2rag.resources import Resources

    resources = Resources(config)
    calls = []
    summaries = resources.context_summary_corpus(resources.corpus("FinQA"), generate=calls.append)
    assert calls == [] and len(summaries) == 4 and all(t for t in summaries.texts)


def test_every_method_through_llama_server(
    llama_server, tiny_data, minilm_reranker, short_system_prompt, tmp_path, capsys
):
    generator = {
        "preset": "openai",
        "base_url": llama_server,
        "model": "smollm2",
        "json_mode": "json_object",
        "concurrency": 2,
        "sampling": {"max_tokens": 24},
    }
    result = run_local(_config(tiny_data, tmp_path / "run", generator, minilm_reranker, short_system_prompt))
    _check_run(result, tmp_path / "run", tiny_data, capsys)
