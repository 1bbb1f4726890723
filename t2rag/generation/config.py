"""What every generator config has; each engine's module adds its own fields in a subclass tagged by `engine`
(the whole union is `t2rag.generation.registry`'s)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from t2rag.generation.base import SamplingParams


class GeneratorConfig(BaseModel):
    """Which engine and model generate answers, and how. The fields here mean the same on every engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    engine: str
    model: str = "smollm2-135m"  # llamacpp: a packaged model name or a .gguf path; otherwise the model id
    sampling: SamplingParams = SamplingParams()
    constrained_json: bool = True  # ask the engine to enforce the answer's JSON schema
    #: Schedule a run's generation by shared prompt prefix (t2rag.generation.prefix): prompts that begin alike run
    #: back to back on the same engine and each distinct prompt runs once. False keeps plan order and least-busy
    #: routing, to measure the saving side by side.
    prefix_reuse: bool = True
    #: Replicas of the generator a Ray run or a served app holds (each loads the model once).
    replicas: int = Field(1, ge=1)
    #: Rows a Ray run sends a replica per call.
    batch_size: int = Field(8, ge=1)
