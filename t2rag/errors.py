"""Errors the CLI turns into a one-line message and a non-zero exit code."""

import re


class T2RagError(Exception):
    """Base class for expected, user-facing errors (bad input, bad config, missing data)."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (library errors often span many)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class DataError(T2RagError):
    """The dataset is missing, unreadable or fails validation."""


class InputError(T2RagError):
    """A user-supplied file or argument is malformed."""


class ConfigError(T2RagError):
    """A run configuration is invalid."""


class ModelUnavailable(T2RagError):
    """A model's weights cannot be found or loaded: no retry or rerun mends it, only providing them."""


class EngineRefused(T2RagError):
    """The inference engine refused the configuration (an unknown argument, a length that does not fit)."""


class GeneratorUnavailable(T2RagError):
    """No replica of a Ray run's generator came back within `ray.generator_restart_s`: the run ends (a rerun
    resumes) instead of waiting for a node that may never come."""


def permanent_error(exc: BaseException) -> T2RagError | None:
    """The T2RagError behind `exc`, if any: in its chain, or named in the text of an error Ray relayed from a
    worker (an actor that died in its constructor reaches the driver as text: `t2rag.errors.Name: message`)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, T2RagError):
            return current
        todo += [current.__cause__, current.__context__, getattr(current, "cause", None)]
    match = re.search(r"t2rag\.errors\.(\w+): (.+)", str(exc))
    kind = globals().get(match.group(1)) if match else None
    if isinstance(kind, type) and issubclass(kind, T2RagError):
        return kind(match.group(2).strip())
    return None


class PluginError(T2RagError):
    """A plugin (a method, retriever or stage registered from outside t2rag) cannot be loaded or misbehaves."""
