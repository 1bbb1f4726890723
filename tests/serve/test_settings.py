"""The app's arguments: how they resolve to a run config and served methods, and the shipped serve/config.yaml."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import pytest
import yaml

from serve.settings import ServeSettings, corpus_names, default_corpus
from t2rag.errors import ConfigError

CONFIG_YAML = Path(__file__).resolve().parents[2] / "serve" / "config.yaml"


def names(methods) -> list[str]:
    return [m.name for m in methods]


def test_defaults_serve_the_sample_with_smollm2_and_every_online_method():
    settings = ServeSettings()
    config = settings.run_config()
    assert config.data.source is None and config.generator is not None
    assert config.generator.name == "smollm2-135m"
    assert names(settings.served_methods(config)) == [
        "pretrained_only",
        "oracle",
        "bm25_focus",  # the best retriever, served by default
        "bm25",
        "base",
        "hybrid_bm25",
        "hybrid_rrf",
    ]


def test_arguments_override_the_run_config(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data: {subsets: [TAT-DQA]}\nmethods: [bm25]\ngenerator: qwen2.5-0.5b\nretrieval: {k: 5}\n")
    settings = ServeSettings(
        config=str(path),
        subsets=["FinQA"],
        generator={"preset": "smollm2-135m", "sampling": {"max_tokens": 32}},
        overrides={"retrieval": {"hybrid": {"alpha": 0.7, "beta": 0.3}}},
    )
    config = settings.run_config()
    assert config.data.subsets == ["FinQA"] and config.retrieval.k == 5 and config.retrieval.hybrid.alpha == 0.7
    assert config.generator.name == "smollm2-135m" and config.generator.sampling.max_tokens == 32
    assert names(settings.served_methods(config)) == ["pretrained_only", "oracle", "bm25"]


def test_no_generator_serves_retrieval_only():
    settings = ServeSettings(generator="none")
    config = settings.run_config()
    assert config.generator is None
    assert names(settings.served_methods(config)) == ["bm25_focus", "bm25", "base", "hybrid_bm25", "hybrid_rrf"]
    with pytest.raises(ConfigError, match="'oracle' cannot be served: it only answers"):
        ServeSettings(generator="none", methods=["oracle"]).served_methods(config)


def test_generated_index_methods_are_refused_when_named_and_skipped_from_a_config(tmp_path, caplog):
    with pytest.raises(ConfigError, match="'hyde' cannot be served"):
        ServeSettings(methods=["bm25", "hyde"]).served_methods(ServeSettings().run_config())
    path = tmp_path / "run.yaml"
    path.write_text("methods: [bm25, summarization, sumcontext]\n")
    settings = ServeSettings(config=str(path))
    with caplog.at_level(logging.WARNING):
        assert names(settings.served_methods(settings.run_config())) == ["pretrained_only", "oracle", "bm25"]
    assert "summarization" in caplog.text and "sumcontext" in caplog.text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"bogus": 1}, "serve args: bogus: Extra inputs"),
        ({"replicas": 0}, "replicas"),
        ({"retriever_replicas": 2}, "retriever_replicas: Extra inputs"),
        ({"autoscaling": {"min_replicas": 3, "max_replicas": 2}}, "min_replicas \\(3\\) is above max_replicas"),
        ({"max_queue_wait_s": 0}, "max_queue_wait_s"),
        ({"max_queued_requests": 0}, "max_queued_requests"),
        ({"generation_timeout_s": "soon"}, "generation_timeout_s"),
    ],
)
def test_bad_arguments_are_config_errors(args, message):
    with pytest.raises(ConfigError, match=message):
        ServeSettings.parse(args)


def test_the_ingress_replicas_and_queue_bounds_reach_serve():
    from serve.app import ingress_scaling
    from serve.ingress import RAGIngress

    fixed = RAGIngress.options(**ingress_scaling(ServeSettings(replicas=3, max_ongoing_requests=8)))
    assert fixed.num_replicas == 3 and fixed.max_ongoing_requests == 8 and fixed.max_queued_requests == 16
    assert fixed.backpressure_config.status_code == 503 and fixed.backpressure_config.retry_after_s == 1.0
    auto = RAGIngress.options(**ingress_scaling(ServeSettings(autoscaling={"max_replicas": 6})))
    config = auto._deployment_config.autoscaling_config
    assert config.min_replicas == 1 and config.max_replicas == 6 and config.target_ongoing_requests == 16


def test_unknown_method_and_generator_are_config_errors():
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        ServeSettings(methods=["nope"]).served_methods(ServeSettings().run_config())
    with pytest.raises(ConfigError, match="unknown generator"):
        ServeSettings(generator="gpt-17").run_config()


def test_corpus_names_pool_several_subsets():
    assert corpus_names(["FinQA"]) == ["FinQA"] and default_corpus(["FinQA"]) == "FinQA"
    assert corpus_names(["FinQA", "TAT-DQA"]) == ["FinQA", "TAT-DQA", "pooled"]
    assert default_corpus(["FinQA", "TAT-DQA"]) == "pooled"


def test_shipped_serve_config_is_valid():
    from ray.serve.schema import ServeDeploySchema

    raw = yaml.safe_load(CONFIG_YAML.read_text())
    schema = ServeDeploySchema.model_validate(raw)
    assert schema.http_options.host == "127.0.0.1"
    (app,) = schema.applications
    module, _, attr = app.import_path.partition(":")
    assert callable(getattr(importlib.import_module(module), attr))
    settings = ServeSettings.parse(app.args)
    assert names(settings.served_methods(settings.run_config())) == list(app.args["methods"])


def test_a_vllm_generator_is_bound_into_the_app_without_vllm_a_config_error():
    from serve.app import compose

    try:
        import ray.serve.llm  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="imports only with vllm"):
            compose(ServeSettings(generator="vllm", methods=["bm25"]))
    else:  # pragma: no cover - environments with vllm: see tests/serve/test_vllm_app.py
        compose(ServeSettings(generator="vllm", methods=["bm25"]))


def test_llm_config_without_vllm_is_a_config_error():
    from t2rag.generation.registry import resolve_generator
    from t2rag.generation.vllm_engine import llm_config

    try:
        import ray.serve.llm  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="imports only with vllm"):
            llm_config(resolve_generator("vllm"))
    else:  # pragma: no cover - GPU environments
        assert llm_config(resolve_generator("vllm")).model_loading_config.model_id == "Qwen/Qwen2.5-7B-Instruct"
