"""Loading a model's weights with one clear line when they cannot be had, and knowing beforehand whether they can.

A model that is neither a local directory nor in the Hugging Face cache, with the Hub unreachable or forbidden
(`HF_HUB_OFFLINE`), fails the same way every time: `loading` turns the loaders' `OSError` into `ModelUnavailable`,
which runs end at once instead of retrying (`t2rag.pipeline.run.run_attempts`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from t2rag.errors import ModelUnavailable, first_line

#: How long a run's model check waits for the Hugging Face Hub to answer.
HUB_TIMEOUT_S = 10


@contextmanager
def loading(model: str, path: str | None = None) -> Iterator[None]:
    """Run a model load; an `OSError` from it (missing files, unknown repository, no network) becomes
    `ModelUnavailable` naming the model and how to provide it."""
    try:
        yield
    except OSError as exc:
        raise ModelUnavailable(unavailable_message(model, path or model, exc)) from exc


def unavailable_message(model: str, path: str, exc: BaseException) -> str:
    where = f"'{model}'" + (f" (from {path})" if path != model else "")
    if Path(path).expanduser().exists():
        how = "its directory is incomplete or not a model of this kind"
    else:
        offline = _offline()
        hub = "HF_HUB_OFFLINE is set, so nothing is downloaded" if offline else "the Hugging Face Hub was not reached"
        how = (
            f"it is not a local directory, not in the Hugging Face cache, and {hub}: download it where the Hub is "
            f"reachable (`hf download {model}`, same HF_HOME), or set the model to a local directory"
        )
    return f"model {where} cannot be loaded: {how} ({type(exc).__name__}: {first_line(exc)})"


@dataclass(frozen=True)
class Availability:
    """Whether a model's weights can be had on this machine, and where from (or why not)."""

    available: bool
    where: str


def hub_availability(source: str) -> Availability:
    """A Hugging Face model by hub id or local directory: a directory, the cache, or a reachable Hub."""
    path = Path(source).expanduser()
    if path.exists():
        return Availability(True, f"local directory {path}")
    if source.startswith(("/", "./", "../", "~")):
        return Availability(False, f"no such directory: {source}")
    from huggingface_hub import try_to_load_from_cache

    for filename in ("config.json", "modules.json"):
        if isinstance(try_to_load_from_cache(source, filename), str):
            return Availability(True, "in the Hugging Face cache")
    if _offline():
        return Availability(False, "not a local directory, not in the Hugging Face cache, and HF_HUB_OFFLINE is set")
    from huggingface_hub import model_info
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        model_info(source, timeout=HUB_TIMEOUT_S)
    except RepositoryNotFoundError:
        return Availability(False, "not a local directory, not cached, and not a model on the Hugging Face Hub")
    except Exception as exc:  # a connection error of any kind: the Hub cannot be reached from here
        reason = f"the Hub was not reached ({type(exc).__name__})"
        return Availability(False, f"not a local directory, not cached, and {reason}")
    return Availability(True, "on the Hugging Face Hub (downloaded at the first load)")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
