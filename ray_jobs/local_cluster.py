"""A Ray cluster on this machine for one command: listening on loopback only, and gone when the command ends, even
when the command is killed.

Ray binds its servers to the node's IP, and a node that is not part of a multi-machine cluster takes the loopback
IP when `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER` is off. Ray reads that variable once, at import: this process has
imported Ray already, so its constant is set too; the processes Ray starts read the variable.

Ray ties the processes it starts itself to the driver, but the agents the raylet starts (DashboardAgent,
RuntimeEnvAgent) outlive a killed driver. A small reaper process (ray_jobs/reaper.py) watches the driver through a
pipe and stops what is left of the cluster when the pipe closes.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from typing import Any

log = logging.getLogger(__name__)

#: Ray starts workers at niceness 15 so that its own servers always get the CPU. On one machine the driver and those
#: servers then take the cores from the workers doing the job (docs/performance.md, "Why the defaults in the
#: code"), so workers here run at normal priority. A user's setting wins.
WORKER_NICENESS_ENV = "RAY_worker_niceness"
_reaper: subprocess.Popen | None = None


def local_cpus() -> int:
    """Logical CPUs of a cluster on this machine. Every actor pool holds its CPUs for the whole run (a run of the
    paper's methods places about ten, an embedding actor holding the machine's cores) and the tasks between them
    need some too; when the pools hold them all, Ray Data waits forever for a task slot (seen at 8 on 2 cores)."""
    return max(16, 4 * (os.cpu_count() or 1))


def start_local_cluster(**init_kwargs: Any) -> None:
    """`ray.init` a new local cluster on loopback, with a reaper for a driver that dies without shutting it down."""
    import psutil
    import ray

    from ray_jobs.ray_private import allow_clusters_on_one_host

    global _reaper
    allow_clusters_on_one_host()
    os.environ.setdefault(WORKER_NICENESS_ENV, "0")
    before = {p.pid for p in psutil.Process().children()}
    with warnings.catch_warnings():
        # A process that has used LanceDB warns in every child it forks; these children exec at once (Ray's servers,
        # the reaper) and never touch LanceDB's runtime.
        warnings.filterwarnings("ignore", "lancedb fork support", RuntimeWarning)
        ray.init(include_dashboard=False, **init_kwargs)
        started = [str(p.pid) for p in psutil.Process().children() if p.pid not in before]  # GCS, raylet, monitors
        _reaper = subprocess.Popen(
            [sys.executable, "-m", "ray_jobs.reaper", *started],
            stdin=subprocess.PIPE,
            start_new_session=True,  # Ctrl-C in the terminal must not reach it: it acts when this process is gone
        )


def stop_local_cluster() -> None:
    """Shut Ray down and let the reaper check that nothing of the cluster is left."""
    import ray

    global _reaper
    ray.shutdown()
    if _reaper is not None:
        reaper, _reaper = _reaper, None
        assert reaper.stdin is not None
        reaper.stdin.close()
        try:
            reaper.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log.warning("the Ray reaper (pid %d) did not finish within 30 s", reaper.pid)
