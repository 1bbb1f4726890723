"""What a cluster can hold, and whether a run's pools fit on it before anything is placed.

A cluster is a list of nodes (CPUs, GPUs, accelerator type): the nodes of a running cluster (`live_nodes`), or the
largest cluster a launcher file can scale to (`ray_jobs.cluster_file.nodes_of`). `fit` packs the pools onto them
the way Ray must place them: every actor on one node, the GPUs of one vLLM replica's tensor-parallel group on one
node, and one CPU left for Ray Data's tasks between the pools (when actors hold every CPU, the job waits forever).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from t2rag.pools import PoolSpec

#: CPUs that must stay free for Ray Data's tasks (reading blocks, light stages, writing records).
TASK_CPUS = 1.0


@dataclass(frozen=True)
class Node:
    """One node: its CPUs and GPUs, and the accelerator type of its GPUs."""

    name: str
    cpus: float
    gpus: float
    accelerator: str | None = None


@dataclass
class _Free:
    node: Node
    cpus: float
    gpus: float


@dataclass(frozen=True)
class Fit:
    """The outcome of packing pools onto nodes: fits, or the first pool that could not be placed and why."""

    fits: bool
    pool: PoolSpec | None = None
    reason: str = ""
    needed: dict[str, float] = field(default_factory=dict)  # CPUs and GPUs the pools ask for in all
    available: dict[str, float] = field(default_factory=dict)

    def message(self) -> str:
        if self.fits:
            return "fits"
        assert self.pool is not None
        return (
            f"the run cannot be placed: the {self.pool.phase} pool '{describe(self.pool)}' {self.reason} "
            f"(the run asks for {_amounts(self.needed)}; the cluster has {_amounts(self.available)})"
        )


def describe(pool: PoolSpec) -> str:
    """A pool in a few words: its stages, engine, model and size."""
    what = "+".join(pool.stages)
    size = f"{pool.shape.actors} x {_num(pool.shape.cpus)} CPU" + (
        f" + {_num(pool.shape.gpus)} GPU" if pool.shape.gpus else ""
    )
    engine = f"{pool.engine}, " if pool.engine else ""
    if pool.engine and pool.shape.gpus:
        engine += f"tensor parallel {pool.shape.gpus_together}, "
    return f"{what} ({engine}{pool.model + ', ' if pool.model else ''}{size})"


def _num(x: float) -> str:
    return f"{x:g}"


def _amounts(r: dict[str, float]) -> str:
    return f"{_num(r.get('CPU', 0))} CPUs and {_num(r.get('GPU', 0))} GPUs"


def totals(nodes: list[Node]) -> dict[str, float]:
    return {"CPU": sum(n.cpus for n in nodes), "GPU": sum(n.gpus for n in nodes)}


def demand(pools: list[PoolSpec]) -> dict[str, float]:
    return {
        "CPU": sum(p.shape.actors * p.shape.cpus for p in pools) + TASK_CPUS,
        "GPU": sum(p.shape.actors * p.shape.gpus for p in pools),
    }


def fit(pools: list[PoolSpec], nodes: list[Node]) -> Fit:
    """Whether all `pools` can be placed at once on `nodes` (first fit, largest units first)."""
    free = [_Free(n, n.cpus, n.gpus) for n in nodes]
    units = []  # (pool, cpus, gpus) per actor, or per group of an actor's GPUs that must share a node
    for pool in pools:
        groups = (
            max(1, round(pool.shape.gpus / pool.shape.gpus_together))
            if pool.shape.gpus and pool.shape.gpus_together
            else 1
        )
        for _ in range(pool.shape.actors):
            units += [(pool, pool.shape.cpus / groups, pool.shape.gpus / groups)] * groups
    units.sort(key=lambda u: (u[2], u[1]), reverse=True)
    needed, available = demand(pools), totals(nodes)
    for pool, cpus, gpus in units:
        slot = next((f for f in free if _holds(f, pool, cpus, gpus)), None)
        if slot is None:
            return Fit(False, pool, _why(pool, cpus, gpus, free, available), needed, available)
        slot.cpus -= cpus
        slot.gpus -= gpus
    if sum(f.cpus for f in free) < TASK_CPUS:
        last = pools[-1] if pools else None
        reason = f"leaves no CPU for Ray Data's tasks ({_num(TASK_CPUS)} must stay free)"
        return Fit(False, last, reason, needed, available)
    return Fit(True, needed=needed, available=available)


def _holds(free: _Free, pool: PoolSpec, cpus: float, gpus: float) -> bool:
    if gpus and pool.shape.accelerator and free.node.accelerator != pool.shape.accelerator:
        return False
    return free.cpus + 1e-9 >= cpus and free.gpus + 1e-9 >= gpus


def _why(pool: PoolSpec, cpus: float, gpus: float, free: list[_Free], available: dict[str, float]) -> str:
    unit = f"{_num(cpus)} CPU" + (f" and {_num(gpus)} GPU" if gpus else "") + " on one node"
    own = {"CPU": pool.shape.actors * pool.shape.cpus, "GPU": pool.shape.actors * pool.shape.gpus}
    for kind in ("GPU", "CPU"):
        if own[kind] > available[kind] + 1e-9:
            return f"alone needs {_num(own[kind])} {kind}s; the cluster has {_num(available[kind])}"
    if gpus and pool.shape.accelerator and not any(f.node.accelerator == pool.shape.accelerator for f in free):
        return f"needs {pool.shape.accelerator} GPUs and no node has them"
    largest = max(free, key=lambda f: (f.node.gpus, f.node.cpus), default=None)
    if largest is None:
        return "has no node to run on"
    if gpus > max(f.node.gpus for f in free) or cpus > max(f.node.cpus for f in free):
        return f"needs {unit}; the largest node has {_num(largest.node.cpus)} CPUs and {_num(largest.node.gpus)} GPUs"
    return f"needs {unit}, and the pools placed before it hold the rest"


def live_nodes() -> list[Node]:
    """The alive nodes of the cluster this process is connected to."""
    import ray

    return nodes_of_ray(ray.nodes())


def nodes_of_ray(described: list[dict]) -> list[Node]:
    """Nodes from `ray.nodes()`'s description of a cluster: the alive ones, with their CPUs, GPUs and the
    accelerator type Ray detected (its `accelerator_type:<type>` resource)."""
    out = []
    for n in described:
        if not n.get("Alive"):
            continue
        r = n.get("Resources", {})
        accelerator = next((k.split(":", 1)[1] for k in r if k.startswith("accelerator_type:")), None)
        out.append(Node(n.get("NodeManagerAddress", "?"), r.get("CPU", 0.0), r.get("GPU", 0.0), accelerator))
    return out
