"""Every use of Ray's private modules, in one place. Ray may move them in any release, so the dependency is bounded
above by the Ray versions they were tested with (`TESTED_WITH`, pyproject.toml's `ray[data,serve]` bound), and
tests/ray_jobs/test_ray_private.py fails naming the one that moved.

- A cluster on this machine: Ray refuses a multi-node cluster on one host unless told it is for testing
  (`ray_constants.ENABLE_RAY_CLUSTER`).
- Ray's own cluster-file validation (`prepare_config`, `validate_config`): what `ray up` runs before any cloud call;
  Ray has no public validator.
- Every actor the cluster has had, dead ones included (`state.actors`): the public state API needs the dashboard,
  which local clusters here run without.
"""

from __future__ import annotations

import os
from typing import Any

#: The Ray minor versions these uses were tested with.
TESTED_WITH = ("2.60",)
#: Where each private name lives, as the versions above have it.
PRIVATE_NAMES = {
    "ray._private.ray_constants": ("ENABLE_RAY_CLUSTER",),
    "ray.autoscaler._private.util": ("prepare_config", "validate_config"),
    "ray._private.state": ("actors",),
}
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def allow_clusters_on_one_host() -> None:
    """Let this process start a cluster of several nodes on one machine (on loopback)."""
    from ray._private import ray_constants

    os.environ[LOOPBACK_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def validate_cluster_config(raw: dict[str, Any]) -> None:
    """Ray's validation of a cluster launcher file (raises what Ray raises: jsonschema's or a ValueError)."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(dict(raw)))


def all_actors() -> list[dict[str, Any]]:
    """Every actor of the connected cluster, dead ones included, as Ray's GCS describes them."""
    from ray._private.state import actors

    return list(actors().values())
