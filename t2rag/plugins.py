"""Plugins: methods, retrievers and stages registered from outside t2rag, and where each registered name came from.

A plugin reaches t2rag two ways. An installed package declares entry points in the groups `t2rag.methods`,
`t2rag.retrievers` and `t2rag.stages`, each naming an object (a `Method`, a `RetrieverPlugin`, a `Stage` class);
the entry point's name is the registered name. A run config names modules in `plugins:` (beside the config or on
the path); such a module registers at import, with `t2rag.extend.register`. Every registration is attributed to an
`Origin` (the distribution and its version, the module, or the run config), and a name registered twice by two
origins is refused, built-ins included.

The registries themselves (`t2rag.methods.METHODS`, `t2rag.retrieval.config.RETRIEVERS`, `t2rag.stages.STAGES`)
live in their packages, which hand this module a `Registrar` when they are imported; what arrives before its
registrar waits for it. On Ray, `runtime_env()` ships every plugin's code to the workers (py_modules) and names the
entry points it came by, so a worker loads what the driver loaded without the package being installed there.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from t2rag.errors import PluginError, first_line

#: The entry point groups, each with the kind of thing its entry points name, in the order they are loaded (a method
#: names its retriever and stages).
GROUPS: dict[str, str] = {"t2rag.retrievers": "retriever", "t2rag.stages": "stage", "t2rag.methods": "method"}
#: Entry points the driver loaded, for the workers of a Ray run that may not have their package installed.
SHIPPED_ENV = "T2RAG_SHIPPED_PLUGINS"


@dataclass(frozen=True)
class Origin:
    """Where a registered name came from: `built-in`, a distribution (with its version), a module, or `config`."""

    source: str
    version: str | None = None
    #: The top-level module whose code it is (shipped to Ray's workers); None for built-ins and config entries.
    module: str | None = None

    @property
    def label(self) -> str:
        return label(self.source, self.version)

    @property
    def built_in(self) -> bool:
        return self.source == BUILT_IN.source


def label(source: str, version: str | None) -> str:
    """How an origin is named to people: its source, and its version where it has one."""
    return f"{source} {version}" if version else source


BUILT_IN = Origin("built-in")
#: Names registered by a run config's own entries (`rank_fusion:`), which a later config may register again.
FROM_CONFIG = Origin("config")


@dataclass(frozen=True)
class Registrar:
    """How one registry takes a plugin's object: `add(name, obj, origin)` checks and stores it, `names()` lists every
    registered name (built-ins included)."""

    add: Callable[[str, object, Origin], None]
    names: Callable[[], Iterable[str]]
    #: The pydantic model of a registered name's block under a run config's `settings:` (None: it takes none).
    settings: Callable[[str], type | None] = lambda name: None


_registrars: dict[str, Registrar] = {}
_pending: list[tuple[str, str, object, Origin]] = []
_origins: dict[tuple[str, str], Origin] = {}
_current: list[Origin] = []  # the module plugin being imported (its register calls are attributed to it)
_loaded_entry_points: list[dict[str, str | None]] = []
_entry_points_done = False


def add_registrar(group: str, registrar: Registrar) -> None:
    """Called by each registry's package when imported; registrations that waited for it are applied."""
    _registrars[group] = registrar
    waiting = [p for p in _pending if p[0] == group]
    _pending[:] = [p for p in _pending if p[0] != group]
    for group_, name, obj, origin in waiting:
        register(group_, name, obj, origin)


def origin_of(group: str, name: str) -> Origin:
    """Who registered `name` in `group` (built-in unless a plugin or a config did)."""
    return _origins.get((group, name), BUILT_IN)


def current_origin() -> Origin | None:
    """The module plugin being imported, if any (a `register` call made outside any import is the caller's)."""
    return _current[-1] if _current else None


def register(group: str, name: str, obj: object, origin: Origin) -> None:
    """Register `obj` as `name` in `group`, refusing a name another origin holds."""
    kind = GROUPS[group]
    registrar = _registrars.get(group)
    if registrar is None:
        _pending.append((group, name, obj, origin))
        return
    held = _origins.get((group, name)) or (BUILT_IN if name in set(registrar.names()) else None)
    replaceable = held is None or held == origin or (held.source == origin.source == FROM_CONFIG.source)
    if not replaceable:
        raise PluginError(f"plugin {origin.label}: {kind} '{name}' clashes with the {kind} of that name "
                          f"{'built into t2rag' if held.built_in else f'from {held.label}'}")  # fmt: skip
    registrar.add(name, obj, origin)
    if not origin.built_in:
        _origins[(group, name)] = origin


def validated_settings(name: str, model: type[BaseModel], blocks: Mapping[str, Any]) -> BaseModel:
    """`name`'s block of a run's `settings:` validated by its model (the model's defaults where there is none)."""
    try:
        return model.model_validate(dict(blocks.get(name) or {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PluginError(f"settings.{name}.{'.'.join(map(str, first['loc']))}: {first['msg']}") from exc


def settings_model(name: str) -> type | None:
    """The settings model of whatever is registered as `name` (a retriever or a stage), or None."""
    for registrar in _registrars.values():
        model = registrar.settings(name)
        if model is not None:
            return model
    return None


def load_plugins(modules: Sequence[str] = (), search: Path | None = None) -> None:
    """Load the installed packages' entry points (once per process), what a Ray driver shipped to this worker, and
    the named modules (`search` first on the path: the run config's folder)."""
    _load_entry_points()
    for name in modules:
        load_module(name, search)


def load_module(name: str, search: Path | None = None) -> None:
    """Import a module plugin, attributing what it registers to it."""
    if name in sys.modules:
        return
    beside = search is not None and ((search / f"{name}.py").is_file() or (search / name / "__init__.py").is_file())
    if beside and str(search) not in sys.path:
        sys.path.insert(0, str(search))
    top = name.partition(".")[0]
    with _attributed(Origin(name, module=top)):
        try:
            module = importlib.import_module(name)
        except PluginError:
            raise
        except Exception as exc:
            sys.modules.pop(name, None)
            raise PluginError(f"plugin {name}: cannot import it ({type(exc).__name__}: {first_line(exc)})") from exc
    version = getattr(module, "__version__", None)
    if version is not None:  # attribute what it registered to its version too
        for key, origin in list(_origins.items()):
            if origin == Origin(name, module=top):
                _origins[key] = Origin(name, str(version), top)


@contextmanager
def _attributed(origin: Origin) -> Iterator[None]:
    _current.append(origin)
    try:
        yield
    finally:
        _current.pop()


def _load_entry_points() -> None:
    global _entry_points_done
    if _entry_points_done:
        return
    _entry_points_done = True
    seen: set[tuple[str, str]] = set()
    for group in GROUPS:
        for point in entry_points(group=group):
            dist = point.dist
            source, version = (dist.name, dist.version) if dist else (point.module, None)
            found = {"group": group, "name": point.name, "value": point.value, "source": source, "version": version}
            _load_entry_point(found)
            seen.add((group, point.name))
    shipped = json.loads(os.environ.get(SHIPPED_ENV) or "[]")
    for found in shipped:
        if (found["group"], found["name"]) not in seen:
            _load_entry_point(found)


def _load_entry_point(found: dict[str, str | None]) -> None:
    value = str(found["value"])
    origin = Origin(str(found["source"]), found["version"], value.partition(":")[0].partition(".")[0])
    module, _, attr = value.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except Exception as exc:
        raise PluginError(f"plugin {origin.label}: cannot import its {GROUPS[str(found['group'])]} "
                          f"'{found['name']}' ({value}: {type(exc).__name__}: {first_line(exc)})") from exc  # fmt: skip
    register(str(found["group"]), str(found["name"]), obj, origin)
    _loaded_entry_points.append(found)


def origins_in_use(pairs: Iterable[tuple[str, str]]) -> dict[str, dict[str, dict[str, str | None]]]:
    """For (group, name) pairs, the outside origin of each that has one, by kind (plural) and name:
    {"methods": {name: {source, version}}, "retrievers": ..., "stages": ...}, kinds with none left out."""
    out: dict[str, dict[str, dict[str, str | None]]] = {}
    for group, name in pairs:
        origin = _origins.get((group, name))
        if origin is not None:
            out.setdefault(GROUPS[group] + "s", {})[name] = {"source": origin.source, "version": origin.version}
    return out


def runtime_env() -> dict | None:
    """What a Ray job needs for the plugins this process loaded: their top-level modules' code (py_modules) and the
    entry points they came by; None when no plugin is loaded."""
    modules = sorted({o.module for o in _origins.values() if o.module})
    if not modules:
        return None
    env: dict = {"py_modules": [_code_path(m) for m in modules]}
    if _loaded_entry_points:
        env["env_vars"] = {SHIPPED_ENV: json.dumps(_loaded_entry_points)}
    return env


def _code_path(module: str) -> str:
    """A top-level module's package folder, or its one file."""
    loaded = sys.modules.get(module) or importlib.import_module(module)
    file = getattr(loaded, "__file__", None)
    if file is None:
        raise PluginError(f"plugin {module}: has no source file to ship to Ray's workers")
    path = Path(file)
    return str(path.parent if path.name == "__init__.py" else path)
