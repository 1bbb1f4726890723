"""The Serve application's arguments (from serve/config.yaml, `t2rag serve`, or code) and what they resolve to.

The data, retrieval and generator settings are an ordinary t2rag run config (a YAML file and/or overrides), so the
served retrievers are built exactly as the batch job builds them. The rest sizes the deployments.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from serve.guard import GuardSettings
from t2rag.config import RunConfig, load_config
from t2rag.data import POOLED
from t2rag.errors import ConfigError
from t2rag.methods import Method, get_method

log = logging.getLogger(__name__)

DEFAULT_GENERATOR = "smollm2-135m"
API_KEY_ENV = "T2RAG_API_KEY"
NO_GENERATOR = "none"
#: Served when no methods are named: these answer-only methods (when there is a generator), the best retriever
#: (without a run config) and the config's methods.
ANSWER_ONLY = ("pretrained_only", "oracle")
#: The best retriever measured on dev within 3x BM25's cost (configs/best_retrieval.yaml: MRR@3 97.77 where BM25
#: gets 69-73), served whatever the config's methods.
BEST_RETRIEVER = "bm25_focus"


class Autoscaling(BaseModel):
    """Serve's autoscaler for the ingress replicas: it adds replicas while each holds more than
    `target_ongoing_requests` on average, and removes them when they hold fewer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(4, ge=1)
    target_ongoing_requests: float = Field(
        16, gt=0, description="requests per replica the autoscaler aims for (about a batch in flight and one waiting)"
    )
    upscale_delay_s: float = Field(5.0, ge=0)
    downscale_delay_s: float = Field(60.0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) is above max_replicas ({self.max_replicas})")
        return self


class ServeSettings(BaseModel):
    """Arguments of `serve.app:build_app`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: str | None = Field(None, description="run config YAML (data, retrieval, generator)")
    data: str | None = Field(None, description="hub id, local directory or s3:// prefix; None: the bundled sample")
    subsets: list[str] | None = Field(None, description="subsets to load; None: all present")
    methods: list[str] | None = Field(
        None,
        description=f"methods to serve; None: pretrained_only, oracle and the run config's methods ({BEST_RETRIEVER} "
        "and the default methods without a config)",
    )
    generator: str | dict[str, Any] | None = Field(
        None,
        description=f"preset name or mapping; None: the run config's, else {DEFAULT_GENERATOR}; 'none': no generator",
    )
    overrides: dict[str, Any] | None = Field(
        None, description="run config fields laid over the YAML, e.g. {retrieval: {k: 5}, prompts: {...}}"
    )
    # Sizing: the ingress replicas hold the retrievers (indexes and query encoder); the generator is its own.
    replicas: int = Field(1, ge=1, description="ingress replicas, each with every retriever (ignored with autoscaling)")
    autoscaling: Autoscaling | None = Field(
        None, description="scale the ingress replicas with load instead of holding `replicas` (Serve's autoscaler)"
    )
    replica_cpus: float = Field(
        0.25,
        ge=0,
        description="logical CPUs per ingress replica; Ray sets the replica's OMP_NUM_THREADS from it (at least 1), "
        "which bounds the query encoder's torch threads",
    )
    retrieval_gpus: float = Field(0, ge=0, description="GPUs per ingress replica, for the query encoder")
    generator_cpus: float = Field(0.5, ge=0)
    generator_gpus: float = Field(0, ge=0)
    # Batching: the retrieval requests waiting in a replica when its last batch ends are the next batch.
    max_batch_size: int = Field(32, ge=1, description="most queries ranked in one batch")
    generator_ongoing_requests: int = Field(
        32,
        ge=1,
        description="requests one generator replica holds at once; each runs on its own (the engine batches: vLLM "
        "continuously, the HTTP engine by concurrency; llama.cpp runs one at a time)",
    )
    # Back-pressure: refuse quickly (503 with Retry-After) what would not be answered in time.
    max_ongoing_requests: int = Field(
        32, ge=1, description="requests one ingress replica holds at once (waiting for a batch, or running)"
    )
    max_queued_requests: int = Field(
        16,
        ge=1,
        description="requests the HTTP proxy queues for busy ingress replicas; beyond it, 503 at once. Small, so "
        "requests wait in the replicas, where their deadline and the admission control see them; smaller than about "
        "16 and bursts that the proxy has not yet assigned are refused",
    )
    max_queue_wait_s: float = Field(
        0.3,
        gt=0,
        description="a retrieval request expected to take longer than this in a replica (the requests ahead of it "
        "over the rate it has been finishing them) is refused at once (503)",
    )
    retry_after_s: float = Field(1.0, ge=0, description="the Retry-After of a 503 for overload")
    # Access and limits.
    api_key: SecretStr | None = Field(
        default_factory=lambda: SecretStr(os.environ[API_KEY_ENV]) if os.environ.get(API_KEY_ENV) else None,
        description=f"required as `Authorization: Bearer <key>` on every route but /health, /ready and the docs; "
        f"default: the {API_KEY_ENV} environment variable where the app is built; unset: no key",
    )
    body_timeout_s: float = Field(10.0, gt=0, description="a request's body must arrive within this time (else 408)")
    # Deadlines: a request's own `X-Timeout-Ms` header may shorten these, never lengthen them.
    retrieval_timeout_s: float = Field(10.0, gt=0, description="deadline of a /retrieve request (504 after it)")
    generation_timeout_s: float = Field(120.0, gt=0, description="deadline of an /answer or /generate request")
    # Faults.
    health_check_period_s: float = Field(2.0, gt=0)
    health_check_timeout_s: float = Field(10.0, gt=0)

    @classmethod
    def parse(cls, args: dict[str, Any] | ServeSettings | None) -> ServeSettings:
        """Validate builder arguments; a bad one is a ConfigError naming the field."""
        if isinstance(args, ServeSettings):
            return args
        try:
            return cls.model_validate(args or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "args"
            raise ConfigError(f"serve args: {where}: {first['msg']}") from None

    def guard(self, max_body_bytes: int) -> GuardSettings:
        """What the ingress checks on each request before its route runs."""
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        return GuardSettings(max_body_bytes=max_body_bytes, body_timeout_s=self.body_timeout_s, api_key=key)

    def run_config(self) -> RunConfig:
        """The run config: the YAML file (if any) with these arguments laid over it."""
        overrides: dict[str, Any] = dict(self.overrides or {})
        data = {k: v for k, v in (("source", self.data), ("subsets", self.subsets)) if v is not None}
        if data:
            overrides["data"] = {**overrides.get("data", {}), **data}
        if self.generator == NO_GENERATOR:
            overrides["generator"] = None
        elif self.generator is not None:
            overrides["generator"] = self.generator
        config = load_config(self.config, overrides)
        if config.generator is None and self.generator is None:
            config = load_config(self.config, {**overrides, "generator": DEFAULT_GENERATOR})
        return config

    def served_methods(self, config: RunConfig) -> list[Method]:
        """The methods this app serves; those that cannot run online are refused (named) or skipped (defaults)."""
        explicit = self.methods is not None
        answer_only = ANSWER_ONLY if config.generator is not None else ()
        best = (BEST_RETRIEVER,) if self.config is None else ()  # a config's methods are served as it names them
        implied = [*answer_only, *best, *config.methods]
        names = list(self.methods) if explicit else implied
        served: list[Method] = []
        for name in dict.fromkeys(names):
            try:
                method = get_method(name)
            except ValueError as exc:
                raise ConfigError(f"serve args: {exc}") from None
            reason = offline_reason(method, config)
            if reason is None:
                served.append(method)
            elif explicit:
                raise ConfigError(f"serve args: method '{name}' cannot be served: {reason}")
            else:
                log.warning("not serving method %s: %s", name, reason)
        if not served:
            raise ConfigError("serve args: no method to serve")
        return served


def offline_reason(method: Method, config: RunConfig) -> str | None:
    """Why a method cannot be served online, or None when it can."""
    if method.router == "oracle":
        return "the oracle router needs each question's subset, which a served question has not"
    if method.router == "llm" and config.generator is None:
        return "the LLM router asks the generator to rank the subsets, and the app has no generator"
    if method.router == "llm":
        return None  # its routing prompt goes through the app's generator before retrieval
    if method.retrieval_needs_generator:
        return "it needs generated summaries or HyDE documents, which are batch-job steps"
    if not method.retrieves and config.generator is None:
        return "it only answers, and the app has no generator"
    return None


def corpus_names(subsets: list[str]) -> list[str]:
    """The corpora a retriever serves: each loaded subset, plus all of them pooled when there are several."""
    return [*subsets, POOLED] if len(subsets) > 1 else list(subsets)


def default_corpus(subsets: list[str]) -> str:
    """The corpus searched when a request names no subset."""
    return subsets[0] if len(subsets) == 1 else POOLED
