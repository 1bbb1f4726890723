"""A sweep file: a base run config and the values to vary, read into typed trials before anything runs.

    name: embedders
    base: ../retrieval.yaml            # or a mapping: the run config itself
    grid:                              # dotted RunConfig keys to lists of values: every combination is a trial
      retrieval.embedder.model: [all-MiniLM-L6-v2, hashing-384]
      retrieval.k: [3, 5]
    search:                            # and/or sampled trials (Optuna through Ray Tune, or random)
      algorithm: optuna
      trials: 20
      space: {retrieval.bm25.k1: {low: 0.5, high: 2.0}, retrieval.bm25.b: {low: 0.2, high: 1.0}}
    objective: {metric: mrr@3, subset: weighted, mode: max}
    out: runs/sweeps/embedders
    max_concurrent: 2
    tracking: {mlflow: {}}

Every refusal is a `ConfigError` (one line, exit 2) raised before any trial starts.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
import re
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from t2rag.config import RunConfig, TrackingConfig, load_config
from t2rag.errors import ConfigError

#: A sweep with more trials than this needs `--yes` (or a larger `max_trials` in the file).
DEFAULT_MAX_TRIALS = 200
#: Where a sweep's trials, its Tune experiment and its table go, under the sweep's `out`.
TRIALS_DIR = "trials"
TUNE_DIR = "tune"
SWEEP_FILE = "sweep.json"


class Objective(BaseModel):
    """The figure a search optimises and the report's best trial is chosen by."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str = "mrr@3"
    subset: str = "weighted"  # a subset's name, or the weighted average over subsets
    method: str | None = None  # None: the trial's first method
    mode: Literal["max", "min"] = "max"


class Range(BaseModel):
    """One searched key: a float or int range (`log` for a log scale), or a list of choices."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: list[Any] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Range:
        if self.choices is None and (self.low is None or self.high is None):
            raise ValueError("a range needs low and high, or choices")
        if self.choices is None and not self.low < self.high:  # type: ignore[operator]
            raise ValueError(f"low {self.low} is not below high {self.high}")
        return self


class Search(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    algorithm: Literal["optuna", "random"] = "optuna"
    trials: int = Field(ge=1)
    seed: int = 0
    space: dict[str, Range] = Field(min_length=1)


class TableSpec(BaseModel):
    """What the sweep's table shows of each trial: these figures (default: every one) of the objective's method,
    weighted over subsets, or per subset and weighted (`by_subset`, the paper's Table 4 layout)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    figures: list[str] = Field(default_factory=list)
    by_subset: bool = False


class SweepFile(BaseModel):
    """The sweep file's fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "sweep"
    base: str | dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    search: Search | None = None
    objective: Objective = Objective()
    out: str = "runs/sweep"
    max_concurrent: int = Field(2, ge=1)
    max_trials: int = Field(DEFAULT_MAX_TRIALS, ge=1)
    tracking: TrackingConfig = TrackingConfig()
    table: TableSpec = TableSpec()


@dataclass(frozen=True)
class Trial:
    """One run of the sweep: its name (its swept values), those values by dotted key, and its run config."""

    name: str
    values: dict[str, Any]
    config: RunConfig

    def to_dict(self) -> dict:
        return {"name": self.name, "values": self.values, "out": self.config.out,
                "fingerprint": self.config.fingerprint()}  # fmt: skip


@dataclass(frozen=True)
class Sweep:
    """A read sweep: its file's fields, where its base lies, and its grid's trials (a search's come as it runs)."""

    spec: SweepFile
    base_raw: dict[str, Any]
    base_dir: Path | None
    trials: list[Trial] = field(default_factory=list)

    @property
    def out(self) -> str:
        return self.spec.out

    @property
    def swept(self) -> list[str]:
        """The dotted keys a trial's values are given for, in the file's order."""
        keys = list(self.spec.grid)
        if self.spec.search:
            keys += [k for k in self.spec.search.space if k not in keys]
        return keys

    def trial(self, values: dict[str, Any]) -> Trial:
        """The trial of these swept values (a ConfigError names the key and the config's reason)."""
        return make_trial(self, values)


def is_sweep_file(path: str | Path) -> bool:
    """Whether a YAML file is a sweep (it has `grid:` or `search:`) rather than a run config."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False
    return isinstance(raw, dict) and ("grid" in raw or "search" in raw)


def load_sweep(path: str | Path, out: str | None = None, base_overrides: dict | None = None) -> Sweep:
    """Read and check a sweep file; its grid's trials are made (and validated) here. `base_overrides` are run
    config fields set on every trial (a command line's `--data`)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such sweep file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({first_problem(exc)})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a sweep file is a mapping of fields")
    if out is not None:
        raw["out"] = out
    raw.setdefault("out", SweepFile.model_fields["out"].default)
    if not str(raw["out"]).startswith("s3://"):  # as a run's out, from where the command runs; absolute for Tune
        raw["out"] = str(Path(str(raw["out"])).resolve())
    try:
        spec = SweepFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "sweep"
        raise ConfigError(f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}") from None
    if not spec.grid and spec.search is None:
        raise ConfigError(f"{path}: the sweep varies nothing: give a grid: with values or a search:")
    for key, values in spec.grid.items():
        if not values:
            raise ConfigError(f"{path}: grid: {key} has no values")
    if isinstance(spec.base, str):
        base_file = (path.parent / spec.base).resolve()
        base_raw = {"extends": str(base_file)}
        base_dir = base_file.parent
    else:
        base_raw, base_dir = dict(spec.base), path.parent.resolve()
        if "extends" in base_raw:  # relative to the sweep file, as a run config's own extends
            base_raw["extends"] = str((base_dir / str(base_raw["extends"])).resolve())
    base_raw = merge(base_raw, base_overrides or {})
    sweep = Sweep(spec, base_raw, base_dir)
    for key in sweep.swept:
        check_key_path(key)
    trials = [make_trial(sweep, dict(zip(spec.grid, combo, strict=True)))
              for combo in itertools.product(*spec.grid.values())]  # fmt: skip
    if spec.search is not None:  # each end of every range and every choice must make a valid config
        for key, r in spec.search.space.items():
            for value in r.choices if r.choices is not None else [r.low, r.high]:
                make_trial(sweep, {key: int(value) if r.integer else value})
    check_objective(spec.objective, [t.config for t in trials] or [make_trial(sweep, {}).config], bool(spec.search))
    return Sweep(spec, base_raw, base_dir, [] if spec.search else trials)


def make_trial(sweep: Sweep, values: dict[str, Any]) -> Trial:
    """The run config of a base with these dotted keys set; its out is the trial's own folder under the sweep's."""
    name = trial_name(values) or "base"
    overrides: dict[str, Any] = {}
    for key, value in values.items():
        set_dotted(overrides, key, as_field_value(key, value))
    overrides["out"] = f"{sweep.out.rstrip('/')}/{TRIALS_DIR}/{name}"
    overrides.setdefault("name", f"{sweep.spec.name}/{name}")
    raw = {**sweep.base_raw}
    extends = raw.pop("extends", None)
    try:
        if extends is not None:
            config = load_config(extends, merge(raw, overrides))
        else:
            with in_folder(sweep.base_dir):
                config = load_config(None, merge(raw, overrides))
    except ConfigError as exc:
        where = f"trial {name}: " if values else "base: "
        raise ConfigError(f"{where}{exc}") from None
    return Trial(name, values, config)


@contextmanager
def in_folder(where: Path | None) -> Iterator[None]:
    """Relative paths of an inline base (a plugin module, a data folder) read from the sweep file's folder."""
    before = os.getcwd()
    if where is not None:
        os.chdir(where)
    try:
        yield
    finally:
        os.chdir(before)


def trial_name(values: dict[str, Any]) -> str:
    """A folder name that says the swept values: `k=3,model=all-MiniLM-L6-v2` (the keys' last parts, unless two
    keys share one); long names, and names with a rounded float, end in a short hash of the exact values, so two
    trials never share a folder."""
    lasts = [k.rsplit(".", 1)[-1] for k in values]
    parts = []
    for key, last, value in zip(values, lasts, values.values(), strict=True):
        label = last if lasts.count(last) == 1 else key
        parts.append(f"{label}={value_text(value)}")
    name = re.sub(r"[^A-Za-z0-9._=,+@-]", "-", ",".join(parts))
    digest = hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:8]
    if len(name) > 120:
        return f"{name[:110]}~{digest}"
    if any(isinstance(v, float) and value_text(v) != repr(v) for v in values.values()):
        return f"{name}~{digest[:6]}"  # a sampled value shown rounded: two close ones must not share a folder
    return name


def value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple):
        return "+".join(value_text(v) for v in value)
    if isinstance(value, dict):
        return "+".join(f"{k}-{value_text(v)}" for k, v in value.items())
    return str(value)


def as_field_value(key: str, value: Any) -> Any:
    """A one-method value for `methods` (or any list field) means a list of that one."""
    annotation = field_annotation(key)
    if typing.get_origin(annotation) is list and not isinstance(value, list):
        return [value]
    return value


def set_dotted(target: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


def merge(base: dict, overrides: dict) -> dict:
    out = dict(base)
    for key, value in overrides.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        candidate = typing.get_args(candidate)[0] if typing.get_origin(candidate) is typing.Annotated else candidate
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def field_annotation(key: str) -> Any:
    """The annotation of a dotted RunConfig key (Any below a free mapping such as `settings`)."""
    model: type[BaseModel] | None = RunConfig
    annotation: Any = RunConfig
    for part in key.split("."):
        if model is None:
            return Any
        info = model.model_fields.get(part)
        if info is None:
            return None
        annotation = info.annotation
        model = _model_of(annotation)
        if model is not None and model.model_config.get("extra") != "forbid":
            return Any  # a generator's engine settings: the preset's own model checks them
    return annotation


def check_key_path(key: str) -> None:
    """Refuse a dotted key no RunConfig has, naming the close ones."""
    model: type[BaseModel] | None = RunConfig
    walked: list[str] = []
    for part in key.split("."):
        if model is None:  # below a mapping (settings, rank_fusion) or a value: the config's validation decides
            return
        if part not in model.model_fields:
            close = difflib.get_close_matches(part, list(model.model_fields), n=3)
            hint = f" (close: {', '.join('.'.join([*walked, c]) for c in close)})" if close else ""
            raise ConfigError(f"grid/search key {key}: {'.'.join([*walked, part])} is not a config key{hint}")
        walked.append(part)
        model = _model_of(model.model_fields[part].annotation)


#: The scorecard figures an objective may name, by what a trial must do to produce them.
RETRIEVAL_FIGURES = ("mrr@3", "mrr@5", "recall@1", "recall@3", "recall@5", "ndcg@3")
ANSWER_FIGURES = ("number_match", "em", "f1", "exe_acc", "program_acc", "em_if_percent")
ROUTING_FIGURES = ("routing_acc", "routing_ndcg3")


def check_objective(objective: Objective, configs: list[RunConfig], searched: bool) -> None:
    """Refuse an objective no trial produces, and a search scored on a test split."""
    from t2rag.data.schema import SUBSETS

    figures = (*RETRIEVAL_FIGURES, *ANSWER_FIGURES, *ROUTING_FIGURES)
    if objective.metric not in figures:
        close = difflib.get_close_matches(objective.metric, figures, n=3)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise ConfigError(f"objective: {objective.metric} is not a scorecard figure{hint}")
    if objective.subset != "weighted" and objective.subset not in SUBSETS:
        close = difflib.get_close_matches(objective.subset, [*SUBSETS, "weighted"], n=2)
        hint = f" (close: {', '.join(close)})" if close else ""
        raise ConfigError(f"objective: subset {objective.subset} is neither a subset nor weighted{hint}")
    if objective.metric in ANSWER_FIGURES and not any(c.generates(m) for c in configs for m in c.methods):
        raise ConfigError(f"objective: {objective.metric} scores answers, and no trial generates any")
    if objective.metric in ROUTING_FIGURES and not any("@" in m for c in configs for m in c.methods):
        raise ConfigError(f"objective: {objective.metric} scores routing, and no trial runs a routed method")
    if objective.method is not None and not any(objective.method in c.methods for c in configs):
        raise ConfigError(f"objective: no trial runs method {objective.method}")
    if searched:
        split = configs[0].data.split
        if split is None:
            raise ConfigError("objective: a search needs data.split set to a dev split (every split includes test)")
        if split.lower().startswith("test"):
            raise ConfigError(
                f"objective: a search chooses on the split it scores, and this one is {split}: search on a dev "
                "split, then run the chosen trial once on test (t2rag sweep --final TRIAL)"
            )


def first_problem(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]
