"""The configuration reference in docs/ is the config classes' own: every field of every section and engine."""

from __future__ import annotations

from pathlib import Path

from t2rag.config import RunConfig
from t2rag.config_reference import reference
from t2rag.generation.registry import ENGINES

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_end_with_the_reference_the_classes_make():
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert text.endswith(reference()), "rerun: python -m t2rag.config_reference --write docs/configuration.md"


def test_every_field_and_every_engine_is_in_it():
    made = reference()
    for name in [*RunConfig.model_fields, *RunConfig.model_fields["ray"].annotation.model_fields]:
        assert f"| `{name}` |" in made
    for name, engine in ENGINES.items():
        assert f"with `engine: {name}`" in made
        own = set(engine.config_class.model_fields) - {"name", "model", "sampling"}
        assert all(f"| `{field}` |" in made for field in own), name
    assert "| `tensor_parallel_size` | `int` | `1` |" in made and "| `n_ctx` | `int` | `8192` |" in made
