"""The shape of an actor pool: one type that a stage's pool kind resolves to, that `t2rag plan` prices and fits on a
cluster, that Ray places, and that a generator engine asks for its replicas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: The kind of pool a stage needs on Ray: a GPU model (`embed`, `rerank`), a CPU tokenizer (`tokenize`), an index
#: holder (`retrieve`), the generator service (`generate`), or none of its own (`light`: it joins another pool).
PoolKind = Literal["embed", "rerank", "tokenize", "retrieve", "generate", "light"]


@dataclass(frozen=True)
class PoolShape:
    """`actors` actors (a generator's replicas) of `cpus` and `gpus` each, `batch_rows` rows per call;
    `gpus_together` GPUs of one actor must share a node (one tensor-parallel group; None: all of them), each of
    the `accelerator` type when one is named. `runtime_env`: the Ray runtime env of an actor's processes."""

    actors: int
    cpus: float
    gpus: float
    batch_rows: int = 1
    gpus_together: int | None = None
    accelerator: str | None = None
    #: Not part of the shape's identity (a dict cannot be hashed): two shapes that differ only here are equal.
    runtime_env: dict[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PoolSpec:
    """One actor pool of a run (the generator's replicas are one): what it does and its shape."""

    phase: str  # "index": one pool after another; "evaluate": every pool at once; "run": held through both
    role: str  # the work it does: generator, queries, passages, rerank, retrieve, tokenize, light
    stages: tuple[str, ...]
    model: str | None  # what each actor or replica loads
    shape: PoolShape
    engine: str | None = None  # the generator engine these replicas run
    #: Plugins' stages and retrievers that run in it: no rate is known for their work.
    plugins: tuple[str, ...] = ()

    @property
    def model_loads(self) -> int:
        return self.shape.actors if self.model else 0

    def to_dict(self) -> dict:
        s = self.shape
        return {"phase": self.phase, "role": self.role, "stages": self.stages, "model": self.model,
                "actors": s.actors, "cpus": s.cpus, "gpus": s.gpus, "gpus_together": s.gpus_together,
                "accelerator": s.accelerator, "engine": self.engine, "model_loads": self.model_loads,
                **({"plugins": list(self.plugins)} if self.plugins else {})}  # fmt: skip
