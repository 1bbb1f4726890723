"""Every field of a run config, from the config classes themselves: its type, its default, and what it means (its
description, or the comment the class gives it). docs/configuration.md ends with this text (`python -m
t2rag.config_reference --write docs/configuration.md`); a test fails when the two differ. Each generator engine's
own fields come from its registered config class, so an engine added to the registry is documented with the others.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from t2rag.config import RunConfig
from t2rag.generation.base import SamplingParams
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.registry import ENGINES

HEADER = "## Every field (made by `python -m t2rag.config_reference`)\n"


def field_notes(cls: type[BaseModel]) -> dict[str, str]:
    """What the class's source says of each field it declares: the `#:` lines above it or the comment after it."""
    notes: dict[str, str] = {}
    pending: list[str] = []
    for line in textwrap.dedent(inspect.getsource(cls)).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        declared = (
            re.match(r"(\w+)\s*:[^=]*(=.*)?$", stripped)
            if line.startswith("    ") and not line[4:5].isspace()
            else None
        )
        if declared and not stripped.startswith(("def ", "@", "model_config")):
            trailing = re.search(r"  # (.*)$", stripped)
            notes[declared.group(1)] = " ".join(pending) or (trailing.group(1) if trailing else "")
        pending = []
    return notes


def _type(annotation: Any) -> str:
    text = re.sub(r"typing\.|<class '([^']+)'>", r"\1", str(annotation))
    text = re.sub(r"Optional\[Annotated\[([\w.]+), [^\]]*\]\]", r"\1 | None", text)
    return re.sub(r"\b[\w.]+\.(\w+)", r"\1", text).replace("NoneType", "None")


def _default(info: Any) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "see below"
    return f"`{value!r}`".replace("|", "\\|")


def model_table(cls: type[BaseModel], fields: list[str] | None = None) -> str:
    """One markdown table of the fields of `cls` (all, or those named)."""
    notes: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
            notes.update(field_notes(klass))
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, info in cls.model_fields.items():
        if fields is not None and name not in fields:
            continue
        meaning = info.description or notes.get(name, "")
        row = [f"`{name}`", f"`{_type(info.annotation)}`", _default(info), meaning]
        rows.append(
            "| " + " | ".join(cell.replace("|", "\\|") if i != 2 else cell for i, cell in enumerate(row)) + " |"
        )
    return "\n".join(rows) + "\n"


def _nested(cls: type[BaseModel], prefix: str) -> list[tuple[str, type[BaseModel]]]:
    """The config sections inside `cls`, depth first, with their dotted paths."""
    out = []
    for name, info in cls.model_fields.items():
        for arg in [info.annotation, *typing.get_args(info.annotation)]:
            if isinstance(arg, type) and issubclass(arg, BaseModel) and not issubclass(arg, GeneratorConfig):
                path = f"{prefix}{name}"
                out += [(path, arg), *_nested(arg, path + ".")]
    return out


def _first_paragraph(cls: type) -> str:
    """The first paragraph of a class's docstring, on one line."""
    paragraph = (cls.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split()) + "\n" if paragraph else ""


def reference() -> str:
    parts = [HEADER, "### The run (top level)\n", model_table(RunConfig)]
    seen: set[type] = set()
    for path, cls in _nested(RunConfig, ""):
        if cls in seen and cls.__name__ != "BaseModel":
            continue
        seen.add(cls)
        parts += [f"### `{path}`\n", _first_paragraph(cls), model_table(cls)]
    parts += ["### `generator` (every engine)\n", _first_paragraph(GeneratorConfig), model_table(GeneratorConfig)]
    parts += ["### `generator.sampling`\n", _first_paragraph(SamplingParams), model_table(SamplingParams)]
    common = set(GeneratorConfig.model_fields)
    for name, engine in sorted(ENGINES.items()):
        cls = engine.config_class
        own = [
            f
            for f in cls.model_fields
            if f not in common or cls.model_fields[f].default != GeneratorConfig.model_fields[f].default
        ]
        parts += [f"### `generator` with `engine: {name}`\n", _first_paragraph(cls), model_table(cls, own)]
    return "\n".join(p for p in parts if p)


def write(path: str) -> None:
    """Replace the reference at the end of a markdown file (from its heading on) with the current one."""
    with open(path, encoding="utf-8") as source:
        text = source.read()
    head = text[: text.index(HEADER)] if HEADER in text else text.rstrip() + "\n\n"
    with open(path, "w", encoding="utf-8") as out:
        out.write(head + reference())


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--write"]:
        write(sys.argv[2])
    else:
        print(reference(), end="")
