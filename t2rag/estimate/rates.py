"""The throughputs a run's estimate assumes (`t2rag/reference/rates.yaml`, or a file in its layout), each with its
source."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from t2rag.errors import ConfigError

RATES_FILE = Path(__file__).parents[1] / "reference" / "rates.yaml"
#: Output tokens of an answer when neither the config nor the rates name an answer length.
DEFAULT_ANSWER_TOKENS = 150


def position_sum(length: float, computed: float) -> float:
    """How far into a prompt of `length` tokens its last `computed` tokens sit: computed x (2 x length - computed)
    / 1000 (prefill slows with it; `GeneratorRate.prefill_s`). Sums over prompts add."""
    return computed * (2 * length - computed) / 1000


class GeneratorRate(BaseModel):
    """One engine replica of a generator."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    device: Literal["gpu", "cpu"]
    prompt_tokens_per_s: float = Field(gt=0)
    output_tokens_per_s: float = Field(gt=0)
    answer_tokens: int = Field(ge=1)
    load_s: float = Field(ge=0)
    #: How much slower each prompt token is per 1,000 tokens of prompt before it (attention grows with the
    #: prompt): a prompt of T tokens takes T / prompt_tokens_per_s x (1 + prompt_slowdown_per_1k x T / 1000).
    prompt_slowdown_per_1k: float = Field(0.0, ge=0)
    #: Characters per prompt token as the engine counts them (chat template included); None: the config's.
    chars_per_token: float | None = Field(None, gt=0)
    source: str

    def work_s(self, to_compute: int, position_sum: float, output_tokens: int) -> float:
        """Seconds of one replica to prefill and decode prompts (see `prefill_s`)."""
        return self.prefill_s(to_compute, position_sum) + output_tokens / self.output_tokens_per_s

    def prefill_s(self, to_compute: int, position_sum: float) -> float:
        """Seconds to compute `to_compute` prompt tokens, the computed tokens at the end of each prompt (after what
        was reused); `position_sum`: the function of that name summed over the prompts. A token at position x
        costs (1 + 2 x slowdown x x / 1000) / rate, which integrates to T / rate x (1 + slowdown x T / 1000) over a
        whole prompt of T tokens."""
        return (to_compute + self.prompt_slowdown_per_1k * position_sum) / self.prompt_tokens_per_s


class EmbedderRate(BaseModel):
    """One embedding actor: tokens per second on one GPU, or per CPU it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    window: int = Field(ge=1)
    gpu_tokens_per_s: float = Field(gt=0)
    cpu_tokens_per_s: float = Field(gt=0)
    load_s: float = Field(ge=0)
    source: str

    def seconds(self, tokens: float, actors: int, cpus: float, gpus: float) -> float:
        """Seconds for `actors` actors of `gpus` GPUs each (or, without GPUs, `cpus` CPUs each) to embed `tokens`
        tokens, with one model load."""
        speed = (self.gpu_tokens_per_s * gpus if gpus else self.cpu_tokens_per_s * cpus) * actors
        return tokens / speed + self.load_s


class RerankerRate(BaseModel):
    """One reranking actor: pairs per second on one GPU, or per CPU it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gpu_pairs_per_s: float = Field(gt=0)
    cpu_pairs_per_s: float = Field(gt=0)
    load_s: float = Field(ge=0)
    source: str


class PluginRate(BaseModel):
    """One actor running a plugin's stage or retriever: the rows (question, method) it handles per second, and the
    seconds of its first block beyond that (models loaded, the corpus indexed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rows_per_s: float = Field(gt=0)
    load_s: float = Field(ge=0)
    source: str

    def seconds(self, rows: int, actors: int) -> float:
        """Seconds for `actors` actors to handle `rows` rows, each loading once."""
        return rows / (self.rows_per_s * actors) + self.load_s


class Rates(BaseModel):
    """Throughputs by model id, and by registered name for plugins' stages and retrievers."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    generators: dict[str, GeneratorRate]
    embedders: dict[str, EmbedderRate]
    rerankers: dict[str, RerankerRate]
    plugins: dict[str, PluginRate] = Field(default_factory=dict)


@cache
def _cached(path: str) -> Rates:
    try:
        return Rates.model_validate(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable rates file ({str(exc).splitlines()[0]})") from None


def load_rates(path: str | Path | None = None) -> Rates:
    """The packaged rates, or another file in their layout."""
    return _cached(str(path or RATES_FILE))
