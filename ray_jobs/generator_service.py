"""The run's generator on Ray: one set of model-holding replica actors for the whole run, whatever generates.

Context summaries, HyDE's documents and the answers are phases of one job; each sends its request rows through a
light Ray Data stage (`ServiceClient`, in tasks: no CPU, no model) to the same replicas, so a run loads the model
once per replica instead of once per phase, corpus or processor. A replica holds the run's `Generator` behind the one
`Generate` stage every engine uses, placed as its engine asks (`Engine.placement`). An engine that takes batches
from several threads (`concurrent_batches`, vLLM's running batch) gets all its clients' batches at once, so it
always has work queued behind what it runs; the other engines run one batch at a time.

Routing: with `generator.prefix_reuse`, a client sends each row to the replica its prompt's leading part
(`t2rag.generation.prefix.route_key`: the system prompt and the first context) hashes to (rendezvous hashing), so
prompts that share that prefix meet the engine that already computed it; a replica more than `IMBALANCE` batches
busier than the least busy one is passed over for it. Without, each batch goes to the least busy replica.

Faults: replicas restart when they or their node die (`max_restarts=-1`, on a fresh node when the old one is
gone, in their placement group for tensor parallelism). A client retries a batch on another replica when a replica
dies, and treats a replica that gives no answer within `ray.engine_timeout_s` as hung: it is killed (and so
restarted) and the batch goes elsewhere. A batch that fails `ray.generate_attempts` times comes back with its rows
marked failed (`generation_error`), which the run retries on its next attempt. While no replica is alive a batch
waits for one, at most `ray.generator_restart_s`; then the run ends (`GeneratorUnavailable`, one line that says
whether any live node could hold a replica) instead of waiting for a node that may never come.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.errors import GeneratorUnavailable
from t2rag.generation.prefix import route_keys
from t2rag.generation.registry import engine_of
from t2rag.generation.requests import GENERATION_COLUMNS
from t2rag.pools import PoolShape

log = logging.getLogger("t2rag.progress")

#: Batches a replica may hold beyond the least busy one and still get the prompts whose prefix it holds.
IMBALANCE = 4
#: Client tasks in flight per replica, so each replica always has a batch waiting behind the one it runs.
CLIENTS_PER_REPLICA = 2


def generator_placement(config: RunConfig) -> PoolShape:
    """How the run's generator engine asks to be held (t2rag.generation.engine)."""
    assert config.generator is not None
    return engine_of(config.generator).placement(config.generator)


class GeneratorReplica:
    """One replica: the run's generator, loaded when the actor starts (so a load is counted once per start)."""

    def __init__(self, config_json: str):
        from ray_jobs.common import count_loads_on_meter
        from t2rag.resources import Resources
        from t2rag.stages.generate import Generate

        count_loads_on_meter()
        resources = Resources(RunConfig.model_validate_json(config_json))
        resources.generator.load()
        self.stage = Generate(resources)
        # vLLM takes batches from several threads into its running batch; other engines run one batch at a time.
        self.lock = contextlib.nullcontext() if resources.generator.concurrent_batches else threading.Lock()
        self.waiting = 0
        self.served = Counter()  # rows served per route key (the prompts' leading parts)

    def pending(self) -> int:
        """Batches this replica holds (running and queued)."""
        return self.waiting

    def served_routes(self) -> dict[str, int]:
        """Rows this replica generated, per route key of their prompts (`t2rag.generation.prefix.route_key`)."""
        return dict(self.served)

    def where(self) -> dict:
        """The node and process this replica runs in (for operators, and for tests that take a node away)."""
        import os

        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def generate(self, batch: pa.Table) -> pa.Table:
        from ray_jobs.common import report

        self.waiting += 1
        try:
            with self.lock:
                start = time.perf_counter()
                out = self.stage(batch)
                report("generate", batch.num_rows, time.perf_counter() - start)
                self.served.update(route_keys(batch.column("messages_json").to_pylist()))
                return out
        finally:
            self.waiting -= 1


class GeneratorService:
    """The run's replicas, started once (on first use) and held until `stop` (or the end of a `with` block)."""

    def __init__(self, config: RunConfig):
        self.config = config
        self._replicas: list = []
        self.groups: list = []

    @property
    def replicas(self) -> list:
        """The replica actors, started on first use (a run with nothing left to generate loads no model)."""
        if not self._replicas:
            self._start()
        return self._replicas

    def __enter__(self) -> GeneratorService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self) -> None:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        s = generator_placement(self.config)
        bundles = int(s.gpus)
        actor = ray.remote(GeneratorReplica)
        options = {
            "max_restarts": -1,
            "max_task_retries": 0,  # the client retries, on another replica when this one is gone
            # every client may hold a batch here at once (vLLM runs them together), and `pending` still answers
            "max_concurrency": CLIENTS_PER_REPLICA * s.actors + 2,
            "runtime_env": s.runtime_env,
        }
        for _ in range(s.actors):
            if bundles > 1:  # model parallelism: the engine's Ray workers go in this group (one GPU each)
                bundle = {"GPU": 1, "CPU": 1}
                if s.accelerator:
                    bundle[f"accelerator_type:{s.accelerator}"] = 0.001
                group = placement_group([bundle] * bundles, strategy="PACK")
                self.groups.append(group)
                strategy = PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=True)
                handle = actor.options(num_cpus=0, num_gpus=0, scheduling_strategy=strategy, **options)
            else:
                resources = {"num_cpus": s.cpus, "num_gpus": s.gpus}
                if s.accelerator:
                    resources["accelerator_type"] = s.accelerator
                handle = actor.options(**resources, **options)
            self._replicas.append(handle.remote(self.config.model_dump_json()))
        log.info("generator: %d replica(s) of %s starting", s.actors, self.config.generator.model)

    def stop(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for replica in self._replicas:
            ray.kill(replica, no_restart=True)
        for group in self.groups:
            remove_placement_group(group)
        self._replicas, self.groups = [], []


class ServiceClient:
    """The client stage (run in Ray Data tasks, `send_to_service`): sends request rows to the replicas and returns
    them with the generation columns; it holds no model (and no CPU). With `by_prefix`, rows go to their prefix's
    replica (the batch split among replicas, sent at once); otherwise, and for every retry, the batch goes to the
    least busy live replica."""

    def __init__(
        self,
        replicas: list,
        timeout_s: float,
        attempts: int,
        by_prefix: bool = False,
        restart_s: float = 900.0,
        model: str = "the generator",
        shape: PoolShape | None = None,
    ):
        self.replicas = replicas
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.by_prefix = by_prefix
        self.restart_s = restart_s
        self.model = model
        self.shape = shape or PoolShape(1, 1.0, 0.0)

    def __call__(self, batch: pa.Table) -> pa.Table:
        if not self.by_prefix or len(self.replicas) < 2 or batch.num_rows == 0:
            return self._send(batch)
        return self._by_prefix(batch)

    def _by_prefix(self, batch: pa.Table) -> pa.Table:
        """Each row to its route's replica (all parts at once); a part whose replica fails goes the usual way."""
        import ray
        from ray.exceptions import GetTimeoutError

        loads = self._loads()
        least = min(loads.values(), default=0)
        rows: dict[int, list[int]] = {}
        for i, key in enumerate(route_keys(batch.column("messages_json").to_pylist())):
            rows.setdefault(self._replica_for(key, loads, least), []).append(i)
        parts = {r: batch.take(pa.array(positions)) for r, positions in rows.items()}
        sent = {r: self.replicas[r].generate.remote(part) for r, part in parts.items()}
        done = []
        for r, ref in sent.items():
            try:
                done.append(ray.get(ref, timeout=self.timeout_s))
            except Exception as exc:  # lost, restarting or hung: the part goes to the least busy replica
                log.warning("generate: replica %d failed %d rows (%s); sending them elsewhere", r,
                            parts[r].num_rows, type(exc).__name__)  # fmt: skip
                if isinstance(exc, GetTimeoutError):
                    ray.kill(self.replicas[r], no_restart=False)  # hung: restarted, as `_send` does
                done.append(self._send(parts[r]))
        order = pa.array([i for positions in rows.values() for i in positions])
        return pa.concat_tables(done).take(pc.sort_indices(order))

    def _replica_for(self, key: str, loads: dict[int, int], least: int) -> int:
        """The replica a route key hashes to (highest rendezvous score among live replicas), unless it is more
        than IMBALANCE batches busier than the least busy one, which then takes the row."""
        live = list(loads) or list(range(len(self.replicas)))
        chosen = max(live, key=lambda r: hashlib.sha256(f"{key}/{r}".encode()).digest())
        if loads and loads[chosen] - least > IMBALANCE:
            return min(loads, key=loads.get)
        return chosen

    def _send(self, batch: pa.Table) -> pa.Table:
        """The batch to the least busy live replica, retried on another when one dies or hangs."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        errors: list[str] = []
        for attempt in range(1, self.attempts + 1):
            replica = self._wait_for_replica()
            try:
                return ray.get(replica.generate.remote(batch), timeout=self.timeout_s)
            except GetTimeoutError:
                errors.append(f"no answer within {self.timeout_s:g} s (engine hung): restarted")
                ray.kill(replica, no_restart=False)
            except RayActorError as exc:
                errors.append(f"replica lost ({type(exc).__name__})")
            log.warning("generate: attempt %d of %d for %d rows failed: %s", attempt, self.attempts,
                        batch.num_rows, errors[-1])  # fmt: skip
        return _failed(batch, f"generator unavailable after {self.attempts} attempts: {'; '.join(errors)}")

    def _wait_for_replica(self):
        """The least busy live replica; while none is alive (restarting after a lost node: a new node, a model
        load), wait for one, at most `restart_s`, then end the run (`GeneratorUnavailable`)."""
        started = time.monotonic()
        while True:
            replica = self._least_busy()
            if replica is not None:
                return replica
            if time.monotonic() - started > self.restart_s:
                raise GeneratorUnavailable(self._unavailable())
            time.sleep(2.0)

    def _unavailable(self) -> str:
        """Why no replica came back: the live nodes, and how many could hold one by their total resources."""
        import ray

        need = {"CPU": self.shape.cpus, "GPU": _gpus_on_one_node(self.shape)}
        live = [n for n in ray.nodes() if n.get("Alive")]
        fit = [
            n for n in live
            if all(n.get("Resources", {}).get(r, 0.0) >= need[r] for r in ("CPU", "GPU") if need[r] > 0)
        ]  # fmt: skip
        holds = f"{need['CPU']:g} CPU and {need['GPU']:g} GPU"
        where = (
            f"none of the {len(live)} live node(s) has the {holds} a replica needs"
            if not fit
            else f"{len(fit)} of the {len(live)} live node(s) could hold one ({holds}), but none started there"
        )
        return f"generator: no replica of {self.model} came back within {self.restart_s:g} s; {where}"

    def _least_busy(self):
        loads = self._loads()
        return self.replicas[min(loads, key=loads.get)] if loads else None

    def _loads(self) -> dict[int, int]:
        """Batches each live replica holds, by replica index (dead or restarting replicas are left out)."""
        import ray

        probes = {i: r.pending.remote() for i, r in enumerate(self.replicas)}
        ready, _ = ray.wait(list(probes.values()), num_returns=len(probes), timeout=min(self.timeout_s, 30.0))
        loads = {}
        for i, ref in probes.items():
            if ref in ready:
                try:
                    loads[i] = ray.get(ref)
                except Exception:  # a dead or restarting replica
                    continue
        return loads


def _gpus_on_one_node(shape: PoolShape) -> float:
    """The GPUs of one replica that a single node must have (a tensor-parallel group's)."""
    together = shape.gpus_together or shape.gpus
    return float(min(shape.gpus, together)) if shape.gpus else 0.0


def _failed(batch: pa.Table, error: str) -> pa.Table:
    n = batch.num_rows
    columns = {name: pa.nulls(n, dtype) for name, dtype in GENERATION_COLUMNS.items()}
    columns["raw_output"] = pa.array([""] * n, pa.string())
    columns["generation_error"] = pa.array([error] * n, pa.string())
    for name, values in columns.items():
        index = batch.schema.get_field_index(name)
        batch = batch.set_column(index, name, values) if index >= 0 else batch.append_column(name, values)
    return batch


def send_to_service(batch: pa.Table, **client) -> pa.Table:
    """One batch through a `ServiceClient(**client)`: the client stage as a Ray Data task."""
    return ServiceClient(**client)(batch)


def place_on_service(ds, service: GeneratorService, config: RunConfig):
    """`ds` (request rows) through the service: `CLIENTS_PER_REPLICA` client tasks in flight per replica, so each
    replica always has a batch waiting. Tasks, not an actor pool: a client holds nothing, and Ray runs tasks in the
    worker processes it already has (an actor pool starts a process per client in every phase of every run), and
    retries one whose node is lost."""
    g = config.generator
    assert g is not None
    placement = generator_placement(config)
    return ds.map_batches(
        send_to_service,
        fn_kwargs={
            "replicas": service.replicas,
            "timeout_s": config.ray.engine_timeout_s,
            "attempts": config.ray.generate_attempts,
            "by_prefix": g.prefix_reuse,
            "restart_s": config.ray.generator_restart_s,
            "model": g.model,
            "shape": placement,
        },
        concurrency=CLIENTS_PER_REPLICA * len(service.replicas),
        num_cpus=0,
        batch_size=placement.batch_rows,
        batch_format="pyarrow",
    )
