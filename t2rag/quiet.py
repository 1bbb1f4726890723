"""Keep libraries' output that says nothing to the user (weight-loading bars, LanceDB's "creating a new dataset"
notices, model-loading chatter) out of a run's output. Call before the libraries are imported: their switches
are environment variables read at import. Processes started afterwards (a local Ray cluster's workers) inherit
them."""

from __future__ import annotations

import logging
import os

#: Switches read by the libraries themselves (transformers' bars follow huggingface_hub's).
QUIET_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "LANCEDB_LOG": "error",
}
CHATTY_LOGGERS = ("httpx", "sentence_transformers", "urllib3", "filelock", "huggingface_hub")


def quiet_libraries(verbose: int = 0) -> None:
    """Quiet the libraries unless `verbose` >= 2 (`-vv`); a setting already in the environment wins."""
    if verbose < 2:
        for name, value in QUIET_ENV.items():
            os.environ.setdefault(name, value)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
