"""The run lock's lease: a driver on another host that stopped renewing is taken over; a live one is refused."""

from __future__ import annotations

import json
import time

import pytest

from t2rag.errors import ConfigError
from t2rag.pipeline.lock import lock_path, run_lock


def _lock_of_another_host(out, renewed: float, lease_s: float = 120.0) -> None:
    owner = {"host": "head-node-that-was-lost", "pid": 4242, "since": "earlier", "lease_s": lease_s,
             "renewed": renewed}  # fmt: skip
    with open(lock_path(str(out)), "w") as handle:
        json.dump(owner, handle)


def _owner(out) -> dict:
    with open(lock_path(str(out))) as handle:
        return json.load(handle)


def test_a_lock_from_another_host_past_its_lease_is_taken_over(tmp_path):
    out = tmp_path / "run"
    _lock_of_another_host(out, renewed=time.time() - 121)
    with run_lock(str(out)):
        assert _owner(out)["host"] != "head-node-that-was-lost"


def test_a_live_lock_from_another_host_is_refused(tmp_path):
    out = tmp_path / "run"
    _lock_of_another_host(out, renewed=time.time() - 5)
    with pytest.raises(ConfigError, match=r"in use by another run .*head-node-that-was-lost.*120 s lease"):
        run_lock(str(out)).__enter__()


def test_the_holder_renews_its_lease_and_releases_it(tmp_path):
    out = tmp_path / "run"
    with run_lock(str(out), lease_s=0.3):
        first = _owner(out)["renewed"]
        time.sleep(0.5)
        assert _owner(out)["renewed"] > first
    assert not (tmp_path / "run.lock").exists()
