"""Generator presets, config resolution and packaged model files."""

from __future__ import annotations

import pytest

from t2rag.config import load_config
from t2rag.errors import ConfigError
from t2rag.generation.models import PACKAGED_MODELS, resolve_gguf
from t2rag.generation.registry import PRESETS, resolve_generator


def test_named_presets():
    assert {"smollm2-135m", "qwen2.5-0.5b", "qwen2.5-1.5b", "openai", "vllm"} <= set(PRESETS)
    paper = PRESETS["llama-3.3-70b-awq"]
    assert paper.engine == "vllm" and "awq" in paper.quantization and paper.tensor_parallel_size >= 1
    assert PRESETS["qwq-32b-awq"].model == "Qwen/QwQ-32B-AWQ"
    assert all(p.sampling.temperature == 0.0 for p in PRESETS.values())  # greedy by default


def test_resolve_preset_with_overrides():
    cfg = resolve_generator({"preset": "openai", "base_url": "http://127.0.0.1:9/v1", "sampling": {"max_tokens": 64}})
    assert cfg.engine == "openai" and cfg.base_url == "http://127.0.0.1:9/v1"
    assert cfg.sampling.max_tokens == 64 and cfg.sampling.temperature == 0.0
    with pytest.raises(ConfigError, match="unknown generator 'gpt-9'"):
        resolve_generator("gpt-9")


def test_a_sampling_override_keeps_the_presets_other_sampling():
    # The reasoning preset's long max_tokens survives a temperature override (the default would cut its thinking).
    cfg = resolve_generator({"preset": "qwq-32b-awq", "sampling": {"temperature": 0.6, "seed": 7}})
    assert (cfg.sampling.temperature, cfg.sampling.seed, cfg.sampling.max_tokens) == (0.6, 7, 8192)
    assert PRESETS["qwq-32b-awq"].sampling.max_tokens == 8192 != type(cfg.sampling)().max_tokens


def test_run_config_accepts_preset_names_and_flag_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("generator: vllm\nmethods: [oracle]\n")
    cfg = load_config(path, {"generator": {"model": "meta-llama/Llama-3.1-8B-Instruct", "tensor_parallel_size": 2}})
    assert cfg.generator.engine == "vllm"
    assert cfg.generator.model == "meta-llama/Llama-3.1-8B-Instruct" and cfg.generator.tensor_parallel_size == 2
    other = load_config(path, {"generator": {"model": "x"}})
    assert cfg.fingerprint() != other.fingerprint()


def test_packaged_models():
    path = resolve_gguf("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90e6
    with pytest.raises(ConfigError, match="unknown local model"):
        resolve_gguf("gpt-2")
    with pytest.raises(ConfigError, match="no such GGUF"):
        resolve_gguf("/nonexistent/model.gguf")


def test_parts_are_concatenated_in_order(monkeypatch, tmp_path):
    """A model split into parts is assembled once, byte for byte, and reused."""
    import sys
    import types

    parts = []
    for i, payload in enumerate([b"GGUF", b"-part-two", b"-three"], 1):
        f = tmp_path / f"p{i}.bin"
        f.write_bytes(payload)
        module = types.ModuleType(f"fake_part{i}")
        module.get_part_path = lambda f=f: str(f)
        monkeypatch.setitem(sys.modules, f"fake_part{i}", module)
        parts.append(f"fake_part{i}")
    from t2rag.generation.models import PackagedModel

    monkeypatch.setitem(PACKAGED_MODELS, "fake", PackagedModel("fake", "test", "pip install fake", parts=tuple(parts)))
    monkeypatch.setenv("T2RAG_MODELS", str(tmp_path / "models"))
    first = resolve_gguf("fake")
    assert first.read_bytes() == b"GGUF-part-two-three"
    mtime = first.stat().st_mtime_ns
    assert resolve_gguf("fake").stat().st_mtime_ns == mtime  # not rebuilt


def test_missing_model_package_names_the_install_command(monkeypatch):
    from t2rag.generation.models import PackagedModel

    monkeypatch.setitem(
        PACKAGED_MODELS, "absent", PackagedModel("absent", "x", "pip install absent-model", parts=("no_such_module_x",))
    )
    with pytest.raises(ConfigError, match="pip install absent-model"):
        resolve_gguf("absent")
