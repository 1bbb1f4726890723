"""The typed run configuration: which data, which methods, which models and engines.

A run is one YAML file (see configs/); command-line flags override its fields. Unknown keys are errors, so a
typo never silently falls back to a default.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from t2rag import plugins
from t2rag.errors import ConfigError, PluginError
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.registry import as_spec, resolve_generator
from t2rag.judge.config import JudgeConfig
from t2rag.methods import close_names, get_method
from t2rag.prompts import PromptConfig
from t2rag.retrieval.config import RETRIEVERS, RankFusion, RetrievalConfig


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = None  # hub id[@rev], local dir, s3:// prefix; None: the bundled sample
    subsets: list[str] | None = None
    split: str | None = None
    pooled_corpus: bool = False  # one corpus over all subsets instead of one per subset
    #: Another source in the same layout whose contexts (every subset and split) extend every corpus as
    #: distractors; the questions stay this source's.
    distractors: str | None = None


class RoutingConfig(BaseModel):
    """How routed methods (`METHOD@ROUTER`, t2rag.routing) choose what to search."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top: int = Field(1, ge=1)  # subsets searched: the router's top ones (every loaded one: the pooled corpus)
    #: Replaces a subset's description that the semantic and LLM routers read (t2rag.routing.descriptions).
    descriptions: dict[str, str] = Field(default_factory=dict)


class RayConfig(BaseModel):
    """Cluster and actor-pool settings for `runner: ray` (ignored by a single-process run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = None  # None: RAY_ADDRESS if set (inside `ray job submit`), else a local cluster
    num_cpus: int | None = None  # local cluster only
    num_gpus: int | None = None  # local cluster only; may declare GPUs a test machine lacks
    object_store_memory: int | None = None  # bytes, local cluster only
    #: Rows per input block where a row generates: the unit of streaming and of resume (a block of answers can be
    #: minutes of a generator's work, and a killed job loses its blocks in flight).
    block_rows: int = Field(256, ge=1)
    #: Rows per input block where rows only retrieve: a block is seconds of work, and every block costs tasks and
    #: Ray Data bookkeeping (the measurements behind these defaults: docs/performance.md).
    retrieve_block_rows: int = Field(2048, ge=1)
    embed_actors: int = Field(1, ge=1)
    embed_gpus: float = Field(0.0, ge=0)
    #: CPUs per embedding actor, which are also its torch threads. None: 1 beside a GPU, else the node's cores (at
    #: most 8): a CPU encoder on one thread is much slower than a single-process run.
    embed_cpus: float | None = Field(None, gt=0)
    #: Rows per embedding call. The embedder batches inside by rows or tokens; a large call lets it sort by length
    #: and embed a question once for all methods.
    embed_batch_size: int = Field(512, ge=1)
    #: Tokenize for the embedder on CPU actors in front of the embedding actors, so a GPU never waits on a
    #: tokenizer. None: when embedding actors hold GPUs. Never for the hashing embedder, which has no tokenizer.
    tokenize_on_cpu: bool | None = None
    #: Each holds 1 CPU and tokenizes on one thread.
    tokenize_actors: int = Field(2, ge=1)
    retrieve_actors: int = Field(1, ge=1)
    retrieve_batch_size: int = Field(256, ge=1)
    rerank_actors: int = Field(1, ge=1)
    rerank_gpus: float = Field(0.0, ge=0)
    rerank_batch_size: int = Field(64, ge=1)
    #: A generator call with no answer within this long (its queue at the replica included) means a hung engine:
    #: the replica is restarted and the batch sent to another.
    engine_timeout_s: float = Field(900.0, gt=0)
    #: Tries of one batch on the generator's replicas before its rows are marked failed (and left to the next
    #: attempt of the run).
    generate_attempts: int = Field(3, ge=1)
    #: How long a batch waits for a lost generator replica to come back (a replacement node joining, the model
    #: loading) before the run ends with one line saying that no replica came back and whether any live node could
    #: hold one.
    generator_restart_s: float = Field(900.0, gt=0)
    #: Before loading anything, refuse a run whose pools cannot all be placed on the cluster (ray_jobs.preflight).
    #: Turn off on a cluster that autoscales from nodes this driver cannot see (KubeRay without a launcher file).
    check_placement: bool = True

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: object) -> object:
        for old, new in MOVED_RAY_FIELDS.items():
            if isinstance(data, dict) and old in data:
                raise ValueError(f"ray.{old} is now {new} (one knob for Ray runs and served apps)")
        return data


#: Fields that left `ray:`, and where they are now.
MOVED_RAY_FIELDS = {"generate_actors": "generator.replicas", "generate_batch_size": "generator.batch_size"}


class EstimateConfig(BaseModel):
    """What `t2rag plan` assumes where it estimates tokens, time and cost; nothing here changes a result."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Characters per generator token: the paper's Table 2 mean Llama 3.3 tokens per context over the same
    #: contexts' mean characters (t2rag.estimate.workload).
    chars_per_token: float = Field(4.71, gt=0)
    #: Output tokens of one answer; None: the generator's entry in the rates file.
    answer_tokens: int | None = Field(None, ge=1)
    #: A throughput file in the layout of t2rag/reference/rates.yaml (None: that file).
    rates: str | None = None
    price_per_gpu_hour: float | None = Field(None, ge=0)


class MlflowTracking(BaseModel):
    """An MLflow server (`uri: http://...`) or store, and the experiment runs are logged to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    uri: str | None = None  # None: a SQLite store and an artifact folder under the run's or sweep's out
    experiment: str | None = None  # None: the run's or sweep's name


class TrackingConfig(BaseModel):
    """Where finished runs are logged (t2rag.results.tracking); it changes no record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mlflow: MlflowTracking | None = None  # `mlflow: {}`: a store under the run's out (mlflow.db, mlartifacts/)


class RankFusionConfig(BaseModel):
    """A retriever and a method made in the config: reciprocal-rank fusion of registered retrievers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    retrievers: list[str] = Field(min_length=2)
    k_rrf: int = Field(60, ge=1)
    candidates: int = Field(50, ge=1)  # results each retriever ranks before the fusion (at least the search's depth)
    description: str = ""


class RunConfig(BaseModel):
    """One evaluation run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "t2rag"  # the run's name in its manifest and report
    data: DataConfig = DataConfig()  # which questions and contexts
    #: Modules that register methods, retrievers and stages (t2rag.extend), imported before anything else is
    #: validated: beside the config file or on the path. Installed plugins need no entry here.
    plugins: list[str] = Field(default_factory=list)
    #: Each plugin retriever's or stage's own settings block, by its registered name, validated by its model.
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Retrievers made here, each also a method of its name: reciprocal-rank fusion of registered retrievers.
    rank_fusion: dict[str, RankFusionConfig] = Field(default_factory=dict)
    #: The methods to run (t2rag.methods; docs/methods.md).
    methods: list[str] = Field(default_factory=lambda: ["bm25", "base", "hybrid_bm25", "hybrid_rrf"])
    retrieval: RetrievalConfig = RetrievalConfig()  # the retrievers and how many contexts are read
    #: A preset name, or a mapping (optionally `preset: NAME` plus overrides); validated by its engine's config class.
    generator: SerializeAsAny[GeneratorConfig] | None = None
    prompts: PromptConfig = PromptConfig()  # the prompt templates and their limits
    retrieval_only: bool = False  # rank every question, generate nothing
    retrieval_only_methods: list[str] = Field(default_factory=list)  # these only retrieve, even when others generate
    limit: int | None = Field(None, ge=1)  # questions per subset that go to generation (seeded sample)
    seed: int = 0  # of the generation sample
    #: Attempts of the whole run, on either runner: after a fault (a lost node, a failed job) or rows whose
    #: generation failed, what is missing is computed again, up to this many times in all.
    max_attempts: int = Field(3, ge=1)
    out: str = "runs/latest"  # where records, result and manifest go: a folder or an s3:// prefix
    runner: Literal["local", "ray"] = "local"  # this process, or Ray (ray_jobs)
    ray: RayConfig = RayConfig()  # pools and cluster of `runner: ray`
    estimate: EstimateConfig = EstimateConfig()  # what `t2rag plan` assumes
    #: Refuse, before any work, a run that needs a model this machine cannot have (not a local directory, not in
    #: the cache, the Hub not reachable); off where a cluster's workers hold models its driver does not.
    check_models: bool = True
    routing: RoutingConfig = RoutingConfig()  # how routed methods (METHOD@ROUTER) choose the corpus they search
    #: A machine judge of the answers against a baseline method's (`t2rag judge RUN`; t2rag.judge); it changes no
    #: record.
    judge: JudgeConfig | None = None
    tracking: TrackingConfig = TrackingConfig()  # log the finished run to MLflow (`tracking: {mlflow: {}}`)

    @field_validator("generator", mode="before")
    @classmethod
    def _generator_preset(cls, value: object) -> object:
        return resolve_generator(value) if isinstance(value, str | dict) else value

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        if isinstance(data, dict) and "engine" in data:
            raise ValueError("'engine' (local or ray) is now 'runner'; `engine` names a generator's engine")
        return data

    @field_validator("plugins")
    @classmethod
    def _load_plugins(cls, modules: list[str]) -> list[str]:
        plugins.load_plugins(modules)  # a module beside the config file: load_config put its folder on the path
        return modules

    @field_validator("settings")
    @classmethod
    def _settings_are_typed(cls, blocks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in blocks:
            model = plugins.settings_model(name)
            if model is None:
                raise ValueError(f"settings.{name}: no plugin retriever or stage named '{name}' takes settings"
                                 f"{close_names(name, RETRIEVERS)}")  # fmt: skip
            try:
                plugins.validated_settings(name, model, blocks)
            except PluginError as exc:
                raise ValueError(str(exc)) from None  # said with the config file's name, as every field's error
        return blocks

    @field_validator("rank_fusion")
    @classmethod
    def _register_fusions(cls, fusions: dict[str, RankFusionConfig]) -> dict[str, RankFusionConfig]:
        for name, f in fusions.items():
            entry = RankFusion(name, tuple(f.retrievers), f.k_rrf, f.candidates, f.description)
            plugins.register("t2rag.methods", name, entry, plugins.FROM_CONFIG)
        return fusions

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, methods: list[str]) -> list[str]:
        if not methods:
            raise ValueError("no method named")
        why: dict[str, str] = {}
        for name in methods:
            try:
                get_method(name)
            except ValueError as exc:
                why[name] = str(exc)
        if why:
            raise ValueError(f"unknown method(s) {list(why)}: {next(iter(why.values()))}")
        if len(set(methods)) != len(methods):
            raise ValueError("methods are listed more than once")
        return methods

    @model_validator(mode="after")
    def _judged_methods_are_run(self) -> RunConfig:
        if self.judge is not None:
            stray = [m for m in [self.judge.baseline, *(self.judge.methods or [])] if m not in self.methods]
            if stray:
                raise ValueError(f"judge: {stray} are not in methods")
        return self

    @model_validator(mode="after")
    def _retrieval_only_methods_are_run(self) -> RunConfig:
        stray = [m for m in self.retrieval_only_methods if m not in self.methods]
        if stray:
            raise ValueError(f"retrieval_only_methods {stray} are not in methods")
        no_retrieval = [m for m in self.retrieval_only_methods if not get_method(m).retrieves]
        if no_retrieval:
            raise ValueError(f"{no_retrieval} do not retrieve, so they cannot be retrieval-only")
        return self

    def generates(self, method: str) -> bool:
        """Whether answers are generated for this method in this run."""
        return not self.retrieval_only and method not in self.retrieval_only_methods

    def plugins_used(self) -> dict[str, dict[str, dict[str, str | None]]]:
        """Every method, retriever and stage of the run that came from outside t2rag, by kind and name, each with
        its source and version (a method's also with what its generator reads, so a report can attribute its
        answers without loading the plugin)."""
        pairs: list[tuple[str, str]] = []
        for name in self.methods:
            method = get_method(name)
            pairs.append(("t2rag.methods", method.name.partition("@")[0]))
            if method.retriever:
                pairs += [("t2rag.retrievers", r) for r in _retriever_names(method.retriever)]
            pairs += [("t2rag.stages", s) for s in method.stages]
        found = plugins.origins_in_use(dict.fromkeys(pairs))
        for name, entry in found.get("methods", {}).items():
            entry["reader"] = get_method(name).reader
        return found

    def fingerprint(self) -> str:
        """A hash of everything that changes results (not the output location, the runner or the placement)."""
        skip = {"out", "runner", "name", "ray", "estimate", "max_attempts", "check_models", "judge", "tracking"}
        # Left out when empty, so runs made before plugins existed keep their fingerprints.
        skip |= {f for f in ("plugins", "settings", "rank_fusion") if not getattr(self, f)}
        # The judge's prompt settings change no record either; routing settings change only routed methods' (both
        # left out where they change none, so the fingerprints of earlier runs stay as they were).
        unused = {"judge", "judge_max_tokens"}
        if not any(get_method(m).router for m in self.methods):
            skip.add("routing")
            unused |= {"route", "route_max_tokens"}
        exclude = {**dict.fromkeys(skip, True), "generator": {"replicas", "batch_size"}, "prompts": unused}
        payload = self.model_dump(exclude=exclude)
        made_by = self.plugins_used()
        if made_by:  # another version of a plugin is another configuration: its records are not resumed
            payload["plugins_used"] = made_by
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _retriever_names(name: str) -> list[str]:
    """A retriever and, for a rank fusion, the retrievers it fuses (recursively)."""
    return [name, *(m for member in RETRIEVERS[name].members for m in _retriever_names(member))]


def in_this_process(config: RunConfig) -> RunConfig:
    """The config validated again in this process, which received it whole (a Serve replica): its plugins are
    loaded here and its rank fusions registered, as validating it from a file or JSON does."""
    return RunConfig.model_validate_json(config.model_dump_json())


def load_config(path: str | Path | None = None, overrides: dict | None = None) -> RunConfig:
    """Read a YAML run config (or start from defaults) and apply nested overrides. A file may name another with
    `extends: FILE` (relative to itself): its fields are the other file's, with its own on top."""
    raw = _read_config(Path(path), ()) if path is not None else {}
    merged = _merge(raw, overrides or {})
    modules = merged.get("plugins") or []
    if isinstance(modules, list) and all(isinstance(m, str) for m in modules):  # else the validation says why
        plugins.load_plugins(modules, Path(path).resolve().parent if path is not None else None)
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "config"
        message = first["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's own error
        raise ConfigError(f"{path or 'config'}: {where}: {message}") from exc


def _read_config(path: Path, seen: tuple[Path, ...]) -> dict:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({_yaml_reason(exc)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a run config is a mapping of fields")
    if "generator" in raw:  # a preset name in the file can still take overrides
        raw["generator"] = as_spec(raw["generator"])
    base = raw.pop("extends", None)
    if base is None:
        return raw
    parent = (path.parent / str(base)).resolve()
    if parent in seen or parent == path.resolve():
        raise ConfigError(f"{path}: extends {base}, which extends it back")
    return _merge(_read_config(parent, (*seen, path.resolve())), raw)


def _yaml_reason(exc: yaml.YAMLError) -> str:
    """PyYAML's reason and position on one line."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else problem


def _merge(base: dict, overrides: dict) -> dict:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
