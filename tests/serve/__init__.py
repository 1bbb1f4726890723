from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def serve_on_loopback() -> Iterator[str]:
    """A local Ray (a job's own, with its reaper) with Serve's proxy on a free loopback port, shut down afterwards;
    yields the base URL."""
    from ray import serve

    from ray_jobs.local_cluster import start_local_cluster, stop_local_cluster
    from tests.conftest import free_port

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    start_local_cluster(num_cpus=4, object_store_memory=200 * 2**20, log_to_driver=False)
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        stop_local_cluster()
