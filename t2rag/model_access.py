"""Loading a model's weights with one clear line when they cannot be had.

A model that is neither a local directory nor in the Hugging Face cache, with the Hub unreachable or forbidden
(`HF_HUB_OFFLINE`), fails the same way every time: `loading` turns the loaders' `OSError` into `ModelUnavailable`,
which runs end at once instead of retrying (`t2rag.pipeline.run.run_attempts`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from t2rag.errors import ModelUnavailable, first_line


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
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
        hub = "HF_HUB_OFFLINE is set, so nothing is downloaded" if offline else "the Hugging Face Hub was not reached"
        how = (
            f"it is not a local directory, not in the Hugging Face cache, and {hub}: download it where the Hub is "
            f"reachable (`hf download {model}`, same HF_HOME), or set the model to a local directory"
        )
    return f"model {where} cannot be loaded: {how} ({type(exc).__name__}: {first_line(exc)})"
