"""`python -m ray_jobs.reaper PID ...`: stop what is left of a local Ray cluster once its driver is gone.

Started by `start_local_cluster` with the processes `ray.init` started (GCS, raylet, monitors) and a pipe on stdin.
While the pipe is open it records those processes and their descendants (the agents and workers the raylet starts);
when the pipe closes (the driver exited, whether it shut Ray down or was killed) it terminates those still alive,
then kills any that ignore SIGTERM. Only processes of the cluster's tree are touched, never the driver's others.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

import psutil

POLL_S = 1.0
GRACE_S = 5.0


def tree(roots: set[int]) -> dict[int, float]:
    """The roots still running and all their descendants, as pid -> create time (one scan of the process table)."""
    table = {p.pid: p.info for p in psutil.process_iter(["ppid", "create_time"])}
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info["ppid"], []).append(pid)
    found: dict[int, float] = {}
    pending = [pid for pid in roots if pid in table]
    while pending:
        pid = pending.pop()
        if pid not in found:
            found[pid] = table[pid]["create_time"]
            pending.extend(children.get(pid, ()))
    return found


def alive(recorded: dict[int, float]) -> list[psutil.Process]:
    """The recorded processes still running (a reused pid has another create time)."""
    found = []
    for pid, created in recorded.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def reap(processes: list[psutil.Process]) -> None:
    """SIGTERM, a grace period, then SIGKILL for what is still running."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, stubborn = psutil.wait_procs(processes, timeout=GRACE_S)
    for process in stubborn:
        with contextlib.suppress(psutil.Error):
            process.kill()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    roots = {int(a) for a in argv}
    closed = threading.Event()

    def wait_for_eof() -> None:
        while sys.stdin.buffer.read(4096):
            pass
        closed.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    recorded: dict[int, float] = {}
    while True:
        recorded.update(tree(roots))
        roots = set(recorded)  # an orphan of a dead raylet is no longer its child: follow each process once found
        if closed.wait(POLL_S):
            break
    reap(alive(recorded))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
