"""A local Ray cluster for the ray_jobs tests: the logical CPUs a job gives a local cluster, two declared (fake) GPUs.

It starts after the loopback S3 server, so its workers inherit the S3 endpoint and credentials from the environment.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_local(s3_server):
    import ray

    from ray_jobs.local_cluster import local_cpus

    ray.shutdown()
    ray.init(num_cpus=local_cpus(), num_gpus=2, object_store_memory=300 * 2**20, include_dashboard=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()
