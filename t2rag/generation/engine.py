"""What an engine is to the rest of t2rag: its config class, how it is built, what it can do, and how it is placed
on Ray and served. Planning, the Ray pools, the generator service and the served app ask an `Engine`; only the
engine's own module knows its name and fields. Engines are listed in `t2rag.generation.registry`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from t2rag.generation.base import Generator
from t2rag.generation.config import GeneratorConfig
from t2rag.model_access import Availability
from t2rag.pools import PoolShape

#: How an engine takes several requests: one after another in its process, concurrently (an HTTP client), or into
#: one running batch (vLLM's continuous batching).
Batching = Literal["one_at_a_time", "concurrent", "continuous"]


class Engine(ABC):
    """One generation engine: registered by its `name`, which is its configs' `engine` tag."""

    name: ClassVar[str]
    config_class: ClassVar[type[GeneratorConfig]]
    #: The distributions it runs on, whose versions a run's manifest records.
    packages: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def build(self, config: Any) -> Generator:
        """The engine for `config` (not loaded yet)."""

    @abstractmethod
    def batching(self, config: Any) -> Batching:
        """How the engine takes several requests (the single-process runner sends one-at-a-time engines blocks of one
        row, so progress is reported as answers come)."""

    def weights(self, config: Any) -> Availability:
        """Whether the weights a replica loads can be had on this machine (not checked by default)."""
        return Availability(True, f"not checked (engine {self.name})")

    def variant(self, config: Any) -> str:
        """What else about the weights changes the outputs (a quantisation), "" when nothing does."""
        return ""

    def placement(self, config: Any) -> PoolShape:
        """One CPU per replica by default (an engine that holds GPUs says so)."""
        return PoolShape(config.replicas, 1.0, 0.0, config.batch_size, gpus_together=1)

    def for_serving(self, config: Any) -> Any:
        """The config a served replica runs: a served answer must not depend on the requests before it."""
        return config

    def served_backend(self, config: Any) -> Callable[[], Any] | None:
        """Where the engine runs behind `t2rag serve`. None: inside the Generator deployment's replicas (built
        from `for_serving`). Otherwise a builder (called once Ray is up) of the Serve application the Generator
        deployment reaches through a handle, and `served_generator` makes the Generator over that handle; a bad
        config fails here, before anything starts."""
        return None

    def served_generator(self, config: Any, backend: Any) -> Generator:
        """The Generator a served replica runs over its backend's handle (engines with a `served_backend`)."""
        raise TypeError(f"engine '{self.name}' has no served backend")
