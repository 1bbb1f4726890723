"""The throughputs a run's estimate assumes (`t2rag/reference/rates.yaml`, or a file in its layout), each with its
source."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from t2rag.errors import ConfigError

RATES_FILE = Path(__file__).parent / "reference" / "rates.yaml"


class GeneratorRate(BaseModel):
    """One engine replica of a generator."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    device: Literal["gpu", "cpu"]
    prompt_tokens_per_s: float = Field(gt=0)
    output_tokens_per_s: float = Field(gt=0)
    answer_tokens: int = Field(ge=1)
    load_s: float = Field(ge=0)
    source: str


class EmbedderRate(BaseModel):
    """One embedding actor: tokens per second on one GPU, or per CPU it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    window: int = Field(ge=1)
    gpu_tokens_per_s: float = Field(gt=0)
    cpu_tokens_per_s: float = Field(gt=0)
    load_s: float = Field(ge=0)
    source: str


class RerankerRate(BaseModel):
    """One reranking actor: pairs per second on one GPU, or per CPU it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gpu_pairs_per_s: float = Field(gt=0)
    cpu_pairs_per_s: float = Field(gt=0)
    load_s: float = Field(ge=0)
    source: str


class Rates(BaseModel):
    """Throughputs by model id."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    generators: dict[str, GeneratorRate]
    embedders: dict[str, EmbedderRate]
    rerankers: dict[str, RerankerRate]


@cache
def _cached(path: str) -> Rates:
    try:
        return Rates.model_validate(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable rates file ({str(exc).splitlines()[0]})") from None


def load_rates(path: str | Path | None = None) -> Rates:
    """The packaged rates, or another file in their layout."""
    return _cached(str(path or RATES_FILE))
