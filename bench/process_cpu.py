"""Where a command's CPU goes, by kind of process: Ray workers by the actor or task they ran, Ray's own daemons,
the driver. Runs the command, samples every new process twice a second, and prints CPU-seconds per kind when it
ends, with the machine's busy share over the run; exits with the command's status.

Usage: python bench/process_cpu.py [--json] -- pytest -q -m ray
A Ray worker is counted under the last `ray::Name` it showed other than `ray::IDLE`, with its Ray Data stage
(`ray::MapWorker(MapBatches(Retrieve))`); a worker that only ever showed IDLE was prestarted, or ran nothing long
enough to be sampled. CPU a process spent between samples before it exited is lost, so short-lived processes are
undercounted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

import psutil

DAEMONS = ("gcs_server", "raylet", "dashboard", "log_monitor", "runtime_env", "monitor.py", "reaper")


@dataclass
class Seen:
    kind: str
    cpu_s: float


def kind_of(cmdline: list[str], previous: str | None) -> str:
    """The kind a process counts under, from its command line (and the kind it had before, for Ray workers)."""
    if not cmdline:  # an exiting process has none: keep what it was
        return previous or "?"
    title = " ".join(cmdline)
    if title.startswith("ray::"):
        name = re.sub(r"\.\w+$", "", title.split()[0])  # the method it runs dropped; a Ray Data stage kept
        keep = name == "ray::IDLE" and previous is not None and previous.startswith("ray::")
        return previous if keep else name
    for daemon in DAEMONS:
        if daemon in title:
            return daemon
    if "pytest" in title:
        return "pytest"
    return os.path.basename(cmdline[0])[:40]


def sample(seen: dict[int, Seen], before: set[int]) -> None:
    for proc in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        pid = proc.info["pid"]
        if pid in before or proc.info["cpu_times"] is None:
            continue
        times, rec = proc.info["cpu_times"], seen.get(pid)
        seen[pid] = Seen(kind_of(proc.info["cmdline"] or [], rec and rec.kind), times.user + times.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    before = set(psutil.pids())
    seen: dict[int, Seen] = {}
    busy0, started = psutil.cpu_times(), time.time()
    child = subprocess.Popen(command)
    while child.poll() is None:
        sample(seen, before)
        time.sleep(0.5)
    busy1, wall = psutil.cpu_times(), time.time() - started
    idle = (busy1.idle + busy1.iowait) - (busy0.idle + busy0.iowait)
    total = sum(busy1) - sum(busy0)
    by_kind: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    for rec in seen.values():
        by_kind[rec.kind][0] += 1
        by_kind[rec.kind][1] += rec.cpu_s
    rows = sorted(by_kind.items(), key=lambda kv: -kv[1][1])
    figures = {
        "command": command,
        "returncode": child.returncode,
        "wall_s": round(wall, 1),
        "machine_busy_share": round(1 - idle / total, 3) if total else None,
        "kinds": {k: {"processes": n, "cpu_s": round(c, 1)} for k, (n, c) in rows},
    }
    if args.json:
        print(json.dumps(figures))
        sys.exit(child.returncode)
    print(f"{' '.join(command)}: {wall:.0f} s wall, machine busy {figures['machine_busy_share']:.0%}")
    for k, (n, c) in rows:
        print(f"{c:9.1f} CPU-s {n:5d} processes  {k}")
    print(f"{sum(c for _, c in by_kind.values()):9.1f} CPU-s in all")
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
