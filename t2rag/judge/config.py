"""The `judge:` block of a run config (and what `t2rag judge` builds from its flags)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from t2rag.generation.config import GeneratorConfig
from t2rag.generation.registry import resolve_generator

#: The rating every method's starts from, and the baseline's throughout.
BASELINE_RATING = 1000.0


class JudgeConfig(BaseModel):
    """Which answers a judge compares, with which model, and how the ratings are made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    baseline: str  # the method every other is compared with; its rating is fixed at 1000
    #: The judge model: a generator preset name or mapping, as `generator` takes (an OpenAI-compatible server for a
    #: strong judge, vLLM on a cluster, a packaged model for tests).
    judge: SerializeAsAny[GeneratorConfig]
    methods: list[str] | None = None  # the methods judged against the baseline; None: every other that answered
    both_orders: bool = True  # ask each pair in both orders, so a judge's preference for a position cancels
    k_factor: float = Field(16.0, gt=0)  # how far one verdict moves a rating
    rounds: int = Field(1000, ge=10)  # bootstrap rounds over questions for the ratings' intervals
    seed: int = 0  # of the bootstrap

    @field_validator("judge", mode="before")
    @classmethod
    def _judge_preset(cls, value: object) -> object:
        return resolve_generator(value) if isinstance(value, str | dict) else value
