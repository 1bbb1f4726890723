"""One run at a time per output folder: a lock file beside the folder, naming its owner (host, pid, start time).

The lock sits beside `out` (`<out>.lock`), so `--overwrite` clearing the folder never removes it. A lock whose owner
is a process of this host that no longer exists is stale and is taken over; any other is refused with its owner
named. Locally the lock is created exclusively (O_EXCL); on S3, where there is no create-if-absent, it is checked and
then written, which narrows but does not close the race between two hosts starting the same run at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from t2rag.errors import ConfigError
from t2rag.storage import filesystem_for, is_s3, read_bytes, write_bytes

log = logging.getLogger(__name__)


def lock_path(out: str) -> str:
    return str(out).rstrip("/") + ".lock"


def _owner() -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


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
def run_lock(out: str) -> Iterator[None]:
    """Hold `<out>.lock` for the duration of a run."""
    path, owner = lock_path(out), _owner()
    if not _acquire(path, owner):
        holder = _read_owner(path)
        if not _stale(holder):
            who = f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('since')}"
            raise ConfigError(f"{out} is in use by another run ({who}); wait for it, or delete {path} if it is gone")
        log.warning("taking over the stale lock %s of pid %s", path, holder.get("pid"))
        _remove(path)
        if not _acquire(path, owner):
            raise ConfigError(f"{out} was claimed by another run while its stale lock was being replaced")
    try:
        yield
    finally:
        if _read_owner(path) == owner:
            _remove(path)
