"""The Serve tests' cluster: one local Ray with Serve on loopback, kept for every module that asks for it."""

from __future__ import annotations

import pytest

from tests.serve import serve_on_loopback


@pytest.fixture(scope="module")
def serve_url(cluster_keeper) -> str:
    """The base URL of Serve's proxy on the kept cluster (`tests/kept_cluster.py`); a module deletes the apps it
    deployed when it ends."""
    return cluster_keeper.enter("serve", serve_on_loopback)
