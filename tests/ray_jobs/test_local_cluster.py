"""ray_jobs.local_cluster: a local cluster started by a process that has used LanceDB starts quietly."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import sys
    import lancedb
    from ray_jobs.local_cluster import start_local_cluster, stop_local_cluster

    table = lancedb.connect(sys.argv[1]).create_table("t", data=[{"vector": [0.0, 1.0], "doc": 0}])
    assert table.search([0.0, 1.0]).limit(1).to_list()[0]["doc"] == 0
    start_local_cluster(num_cpus=1, object_store_memory=100 * 2**20)
    stop_local_cluster()
    print("stopped")
    """
)


def test_a_cluster_started_after_lancedb_was_used_prints_no_fork_warnings(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"
    assert "fork support" not in done.stderr
