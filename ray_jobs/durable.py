"""Where a Ray job's results last.

`ray job submit --working-dir .` runs the driver in Ray's temporary copy of that directory on the head
(`<ray temp>/session_*/runtime_resources/working_dir_files/...`): a relative `out` written there is gone with the
Ray session, and a resubmission (a new copy) cannot resume from it. So inside a Ray job every place the run writes
(`out`, `retrieval.index_uri`, the `T2RAG_CACHE` directory) must be durable: an `s3://` prefix or an absolute path
on storage every node shares. `T2RAG_STORAGE`, set once (in the job's `env_vars`, the cluster's environment or the
shell), is a durable root that relative paths are resolved under, on either runner.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ray_jobs.common import init_ray
from t2rag.config import RunConfig, load_config
from t2rag.errors import ConfigError
from t2rag.quiet import quiet_libraries
from t2rag.storage import is_s3, join

STORAGE_ENV = "T2RAG_STORAGE"
#: Set by Ray's job supervisor in every job driver's environment: the job's runtime_env and metadata.
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
DURABLE_CHOICES = (
    f"an s3:// prefix or an absolute path on storage every node shares (or set {STORAGE_ENV} to one, and relative "
    "paths are resolved under it)"
)


def in_ray_job() -> bool:
    """Whether this process is the driver of a job submitted to Ray (`ray job submit`, KubeRay's RayJob)."""
    return JOB_CONFIG_ENV in os.environ


def _is_uri(path: str) -> bool:
    return "://" in path


def _relative(path: str) -> bool:
    """A local path that resolves against the current directory."""
    return not _is_uri(path) and not Path(path).expanduser().is_absolute()


def resolve_storage(config: RunConfig) -> RunConfig:
    """The config with relative `out` and `retrieval.index_uri` resolved under `T2RAG_STORAGE` when it is set."""
    root = os.environ.get(STORAGE_ENV)
    if not root:
        return config
    if not (is_s3(root) or Path(root).is_absolute()):
        raise ConfigError(f"{STORAGE_ENV}={root!r}: give an s3:// prefix or an absolute path")
    update: dict = {}
    if _relative(config.out):
        update["out"] = join(root, config.out)
    index_uri = config.retrieval.index_uri
    if index_uri and _relative(index_uri):
        update["retrieval"] = config.retrieval.model_copy(update={"index_uri": join(root, index_uri)})
    return config.model_copy(update=update) if update else config


def vanishing(path: str, cwd: Path | None = None) -> bool:
    """Whether a run writing to `path` from a Ray job's driver would lose it: a relative path, or one inside the
    job's working directory (Ray's temporary copy)."""
    if _is_uri(path):
        return False
    if _relative(path):
        return True
    local = Path(path).expanduser().resolve()
    return "working_dir" in _job_runtime_env() and local.is_relative_to((cwd or Path.cwd()).resolve())


def _job_runtime_env() -> dict:
    try:
        return json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}").get("runtime_env") or {}
    except ValueError:
        return {}


def durable(config: RunConfig) -> RunConfig:
    """The config a Ray run writes with: relative paths under `T2RAG_STORAGE`, then, inside a Ray job, refused
    (one line naming the durable choices) if anything it writes would vanish with the job."""
    config = resolve_storage(config)
    if not in_ray_job():
        return config
    places = {
        "out": config.out,
        "retrieval.index_uri": config.retrieval.index_uri,
        "T2RAG_CACHE": os.environ.get("T2RAG_CACHE"),
    }
    lost = [f"{name} '{path}'" for name, path in places.items() if path and vanishing(path)]
    if lost:
        raise ConfigError(
            f"{', '.join(lost)} would be written inside this Ray job's temporary working directory and lost with "
            f"it (a resubmission could not resume): use {DURABLE_CHOICES}"
        )
    return config


def start_job(config_path: str) -> RunConfig:
    """What every Ray job does first: log lines to the driver, quiet the libraries, read the config (refused when
    its outputs would vanish with the job's node, `durable`) and join or start the cluster it names."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet_libraries()
    config = durable(load_config(config_path))
    init_ray(config.ray)
    return config
