"""One run at a time per output folder: a lock file beside the folder, naming its owner (host, pid, start time)
and when the owner last renewed it.

The lock sits beside `out` (`<out>.lock`), so `--overwrite` clearing the folder never removes it. The owner renews
it every third of its lease (`LEASE_S`) while the run lasts. A lock is stale, and taken over, when its lease has run
out (its driver is gone, on any host: a lost head node, a killed pod) or when its owner is a process of this host
that no longer exists; any other is refused with its owner named. So a resubmitted job (`ray job submit` again,
KubeRay's RayJob retrying) takes over a dead driver's lock by itself within one lease. Locally the lock is created
exclusively (O_EXCL); on S3, where there is no create-if-absent, it is checked and then written, which narrows but
does not close the race between two hosts starting the same run at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from t2rag.errors import ConfigError
from t2rag.storage import filesystem_for, is_s3, read_bytes, write_bytes

log = logging.getLogger(__name__)


def lock_path(out: str) -> str:
    return str(out).rstrip("/") + ".lock"


#: Seconds a lock stays valid without renewal.
LEASE_S = 120.0


def _owner(lease_s: float) -> dict:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "lease_s": lease_s,
        "renewed": time.time(),
    }


def _same(a: dict, b: dict) -> bool:
    return all(a.get(k) == b.get(k) for k in ("host", "pid", "since"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _read_owner(path: str) -> dict:
    data = read_bytes(path)
    try:
        owner = json.loads(data.decode()) if data else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _stale(owner: dict) -> bool:
    renewed, lease = owner.get("renewed"), owner.get("lease_s")
    if isinstance(renewed, int | float) and isinstance(lease, int | float) and time.time() - renewed > lease:
        return True  # its driver stopped renewing it, wherever it ran
    pid = owner.get("pid")
    return owner.get("host") == socket.gethostname() and isinstance(pid, int) and not _alive(pid)


def _acquire(path: str, owner: dict) -> bool:
    payload = json.dumps(owner).encode()
    if is_s3(path):
        if read_bytes(path) is not None:
            return False
        write_bytes(path, payload)
        return True
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(payload)
    return True


def _remove(path: str) -> None:
    fs, inner = filesystem_for(path)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(inner)


@contextmanager
def run_lock(out: str, lease_s: float = LEASE_S) -> Iterator[None]:
    """Hold `<out>.lock` for the duration of a run, renewing its lease in a background thread."""
    path, owner = lock_path(out), _owner(lease_s)
    if not _acquire(path, owner):
        holder = _read_owner(path)
        if not _stale(holder):
            who = f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('since')}"
            raise ConfigError(
                f"{out} is in use by another run ({who}); wait for it (a dead run's lock expires after its "
                f"{holder.get('lease_s', LEASE_S):g} s lease), or delete {path}"
            )
        log.warning("taking over the stale lock %s of pid %s on %s", path, holder.get("pid"), holder.get("host"))
        _remove(path)
        if not _acquire(path, owner):
            raise ConfigError(f"{out} was claimed by another run while its stale lock was being replaced")
    stop = threading.Event()
    renewer = threading.Thread(target=_renew, args=(path, owner, stop), daemon=True, name="t2rag-lock")
    renewer.start()
    try:
        yield
    finally:
        stop.set()
        renewer.join(timeout=10)
        if _same(_read_owner(path), owner):
            _remove(path)


def _renew(path: str, owner: dict, stop: threading.Event) -> None:
    while not stop.wait(owner["lease_s"] / 3):
        try:
            if not _same(_read_owner(path), owner):
                log.warning("the lock %s is no longer this run's", path)
                return
            write_bytes(path, json.dumps({**owner, "renewed": time.time()}).encode())
        except Exception:  # a storage hiccup: try again at the next renewal, well within the lease
            log.debug("renewing %s failed", path, exc_info=True)
