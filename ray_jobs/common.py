"""Ray plumbing shared by the jobs: cluster connection, worker threads, and per-stage progress lines."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ray_jobs.local_cluster import local_cpus, start_local_cluster, stop_local_cluster
from t2rag import plugins
from t2rag.config import RayConfig
from t2rag.progress import format_rate

log = logging.getLogger("t2rag.progress")

METER_NAME = "t2rag-stage-meter"


@contextmanager
def ray_session(cfg: RayConfig) -> Iterator[None]:
    """Ray for the duration of a job: the running instance if there is one, else a connection (or a local cluster)
    that is shut down when the job ends, so nothing of it outlives the job or prints after it."""
    import ray

    if ray.is_initialized():
        yield
        return
    init_ray(cfg)
    try:
        yield
    finally:
        stop_local_cluster()


def init_ray(cfg: RayConfig) -> None:
    """Connect to the cluster (inside `ray job submit`, or `cfg.address`), or start a local one on loopback."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        return
    # The plugins this process loaded reach every worker with the job (their code as py_modules), installed there
    # or not; loaded before connecting, so a config's plugins are known by now.
    plugins.load_plugins()
    shipped = {"runtime_env": env} if (env := plugins.runtime_env()) else {}
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=True, **shipped)
        return
    start_local_cluster(
        num_cpus=cfg.num_cpus or local_cpus(),
        num_gpus=cfg.num_gpus,
        object_store_memory=cfg.object_store_memory,
        **shipped,
    )


def use_held_cpus(torch_threads: bool) -> int:
    """Give this worker's intra-op thread pools as many threads as the CPUs Ray assigned it (at most the machine's
    cores, at least one) and return that number.

    The Rust tokenizers' pool (rayon) otherwise starts a thread per core of the node, whatever the actor holds (192
    on a p5.48xlarge). Rayon reads RAYON_NUM_THREADS when it starts its pool, at the process's first tokenizing
    call, so this runs before any (a user's own setting wins).
    With `torch_threads`, torch too: Ray sets OMP_NUM_THREADS from the CPUs, but torch in a Ray worker was seen
    running 2 threads under OMP_NUM_THREADS=1, so the count is set explicitly (importing torch costs a process
    without a model about 2 s, hence the flag)."""
    import ray

    held = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
    threads = max(1, min(int(held), os.cpu_count() or 1))
    os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
    if torch_threads:
        import torch

        torch.set_num_threads(threads)
    return threads


class StageMeter:
    """A tiny actor collecting rows and busy seconds per stage, and model loads, from every worker."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}
        self.loads: dict[str, int] = {}

    def add(self, stage: str, rows: int, seconds: float) -> None:
        now = time.time()
        entry = self.totals.setdefault(stage, [0, 0.0, now - seconds, now])
        entry[0] += rows
        entry[1] += seconds
        entry[3] = now

    def add_load(self, model: str) -> None:
        self.loads[model] = self.loads.get(model, 0) + 1

    def report(self) -> dict[str, dict[str, float]]:
        return {
            stage: {"rows": int(r), "busy_s": round(s, 3), "first": first, "last": last}
            for stage, (r, s, first, last) in self.totals.items()
        }

    def model_loads(self) -> dict[str, int]:
        return dict(self.loads)

    def reset(self) -> None:
        self.totals.clear()
        self.loads.clear()


def stage_meter():
    """The job's StageMeter actor, shared by name: created by the job's driver on the driver's own node (a node
    that dies takes the driver with it, so the meter adds no point of failure) and restarted if it dies."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    options = {"name": METER_NAME, "get_if_exists": True, "lifetime": None, "max_restarts": -1}
    return ray.remote(num_cpus=0)(StageMeter).options(scheduling_strategy=here, **options).remote()


def read_meter(meter, method: str = "report", timeout_s: float = 30.0) -> dict:
    """What the meter holds, or nothing when it cannot answer in time: figures never fail a job."""
    import ray

    try:
        return ray.get(getattr(meter, method).remote(), timeout=timeout_s)
    except Exception:
        log.warning("the stage meter did not answer; its figures are left out")
        return {}


def report(stage: str, rows: int, seconds: float) -> None:
    """Send a stage's rows and busy seconds to the job's meter, when the job runs one.

    A worker never creates the meter: one created here would be owned by this call and die with it, so every batch
    would start (and lose) a meter process of its own, about a second of CPU each."""
    _to_meter("add", stage, rows, seconds)


def report_load(model: str) -> None:
    """Count one model load on the job's meter."""
    _to_meter("add_load", model)


def _to_meter(method: str, *args: object) -> None:
    import ray

    if not ray.is_initialized():  # a runner called outside Ray has no meter, and must not start a Ray to look
        return
    try:
        getattr(ray.get_actor(METER_NAME), method).remote(*args)
    except ValueError:  # no meter: the job does not read stage figures
        return
    except Exception:  # progress reporting must never fail a batch
        logging.getLogger(__name__).debug("stage meter unavailable", exc_info=True)


def count_loads_on_meter() -> None:
    """Forward every model load of this process to the job's meter."""
    from t2rag.model_loads import on_load

    on_load(report_load)


def log_stage_lines(stats: dict[str, dict[str, float]]) -> list[dict]:
    """One progress line per stage: rows, busy seconds across workers, rows/s of wall time it was active."""
    lines = []
    for stage, s in stats.items():
        wall = max(s["last"] - s["first"], 1e-9)
        rate = format_rate(s["rows"], wall)
        log.info("[%s] rows=%d busy=%.1fs active=%.1fs (%s)", stage, s["rows"], s["busy_s"], wall, rate)
        lines.append({"stage": stage, "rows": s["rows"], "busy_s": s["busy_s"], "active_s": round(wall, 3)})
    return lines
