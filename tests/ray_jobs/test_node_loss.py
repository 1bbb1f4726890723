"""Losing the node that holds the run's generator, on a multi-node cluster on loopback (issue 54's scenario).

The cluster is the kept `worker_nodes` one: a head with no CPUs (the driver and the meter only) and two workers of
8 CPUs and 1 declared GPU each (300 MB object store each). The run: bm25 and base retrieval-only, oracle answered,
3 questions per subset (seed 3), k = 3, two single-GPU embedding actors (the hashing embedder: what is tested is the
generator's node, and MiniLM embeds on this cluster shape in `test_cluster.py`), 2 rows per generating block, the
vector index the single-process runs built. The worker holding the generator replica is removed as a spot node would
be (no graceful shutdown) and a replacement of the same shape joins 10 s later; the run must finish by itself with
exactly one record per (method, id) and the metrics of the same config run in a single process.

Issue 54's scenario: SmolLM2 (llama.cpp) answers with the packaged answer prompt (long enough that the replica still
generates when the node goes), and the node goes 3 s after the replica is seen alive (`ray.util.state.list_actors`,
as an operator would see it); the replica's model must load again on the other node. Then the node goes while the
replica holds a batch, with prefix reuse on and off (the routing and ordering of prompts by prefix are the
engine-agnostic part): there the scripted OpenAI-compatible server answers, each answer taking 2 s, since what is
tested is where the batch and the replica go, not a model's answer (the single-process references get the same
answers at once). (`test_generator_unavailable.py`: a generator that can never come back.)
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from ray_jobs import evaluate
from t2rag.config import load_config
from t2rag.pipeline.local import run_local
from t2rag.run_folder.files import read_records
from tests.conftest import HASHING
from tests.ray_jobs.conftest import replica_holding_a_batch
from tests.scripted_server import scripted_for

pytestmark = pytest.mark.slow

SMOLLM2 = {"preset": "smollm2-135m", "sampling": {"max_tokens": 48}}


def _overrides(
    data, out, index, seed: int, prefix_reuse: bool, runner: str = "ray", generator: dict | None = None, **ray
) -> dict:
    """The run's config fields; `generator`: SmolLM2 by default. A sampling seed of its own keeps each run from the
    others' cached generations in the session's cache (decoding is greedy, so the seed changes no output): every run
    generates."""
    generator = generator or SMOLLM2
    sampling = {**generator.get("sampling", {}), "seed": seed}
    return {
        "data": {"source": data},
        "methods": ["bm25", "base", "oracle"],
        "retrieval_only_methods": ["bm25", "base"],
        "limit": 3,
        "seed": 3,
        "runner": runner,
        "out": str(out),
        "retrieval": {"k": 3, "index_uri": str(index), **HASHING},
        "generator": {**generator, "prefix_reuse": prefix_reuse, "sampling": sampling},
        "prompts": {"max_context_chars": 800},
        "ray": {
            "embed_actors": 2,
            "embed_gpus": 1,
            "embed_batch_size": 64,
            "retrieve_block_rows": 256,
            "block_rows": 2,
            "engine_timeout_s": 300,
            **ray,
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """One vector index for every run of this module: the first run builds it, the others reuse it (the same corpus
    and embedder), so the Ray runs start at what this module tests, the evaluation and its generator."""
    return tmp_path_factory.mktemp("index")


@pytest.fixture(scope="module")
def single_process(tiny_data, index, tmp_path_factory):
    """The same configs run in one process, per generator and prefix setting: the records and metrics to match
    (the scripted server's answers without the delay: the same answers)."""
    runs = {}
    with scripted_for(tiny_data) as scripted:
        for name, generator, reuse in (("smollm2", SMOLLM2, True), ("scripted", scripted, True),
                                       ("scripted", scripted, False)):  # fmt: skip
            root = tmp_path_factory.mktemp(f"local-{name}-{reuse}")
            overrides = _overrides(tiny_data, root / "out", index, 5410 + reuse, reuse, "local", generator)
            runs[name, reuse] = (run_local(load_config(None, overrides)), _records(root / "out"))
    return runs


def _records(out) -> dict:
    table = read_records(str(out)).to_pydict()
    keys = list(zip(table["method"], table["id"], strict=True))
    assert len(keys) == len(set(keys)), "a (method, id) has more than one record"
    return dict(zip(keys, zip(table["context_ids"], table["prediction"], table["number_match"], strict=True),
                    strict=True))  # fmt: skip


def _worker_holding_the_generator(nodes, when: str, services: list, deadline: float):
    """The worker node (of `nodes`, a `WorkerNodes`) to take away, once the replica is alive on it (3 s later, as
    issue 54 did) or holds a batch."""
    import ray
    from ray.util.state import list_actors

    while time.monotonic() < deadline:
        if when == "alive":
            alive = list_actors(filters=[("state", "=", "ALIVE")], detail=True)
            head = nodes.cluster.head_node.node_id
            holders = [a.node_id for a in alive if "Generat" in a.class_name and a.node_id != head]
            if holders:
                time.sleep(3)
                return next(w for w in nodes.workers if w.node_id == holders[0])
        elif (replica := replica_holding_a_batch(services)) is not None:
            with contextlib.suppress(Exception):  # lost between the two calls: look again
                holder = ray.get(replica.where.remote(), timeout=5)["node_id"]
                return next(w for w in nodes.workers if w.node_id == holder)
        time.sleep(0.2)
    raise AssertionError(f"the generator was never {when} on a worker")


def _run_in_thread(config) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def run() -> None:
        try:
            result["run"] = evaluate.run_ray(config)
        except BaseException as exc:  # reported by the test
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


@pytest.mark.parametrize(
    ("when", "prefix_reuse", "seed", "answered_by"),
    [("alive", True, 5401, "smollm2"), ("mid_batch", True, 5402, "scripted"), ("mid_batch", False, 5403, "scripted")],
    ids=["issue-54-scenario", "mid-batch-prefix-reuse", "mid-batch-no-prefix-reuse"],
)
def test_losing_the_generators_node_finishes_by_itself(
    worker_nodes,
    single_process,
    index,
    tiny_data,
    tmp_path,
    recorded_services,
    answering_slowly,
    when,
    prefix_reuse,
    seed,
    answered_by,
):
    nodes = worker_nodes.exactly(2)
    out = tmp_path / "run"
    started = time.monotonic()
    generator = answering_slowly if answered_by == "scripted" else SMOLLM2
    config = load_config(None, _overrides(tiny_data, out, index, seed, prefix_reuse, generator=generator))
    thread, result = _run_in_thread(config)
    lost = _worker_holding_the_generator(nodes, when, recorded_services, time.monotonic() + 300)
    nodes.remove_worker(lost)
    removed = time.monotonic()
    time.sleep(10)
    nodes.add_worker()  # the replacement
    thread.join(timeout=600)
    assert not thread.is_alive(), "the run did not finish within 10 minutes of losing the generator's node"
    assert "error" not in result, result.get("error")
    finished = result["run"]
    reference, records = single_process[answered_by, prefix_reuse]
    assert finished["methods"] == reference["methods"]
    assert _records(out) == records
    assert finished["attempts"]["still_failed"] == 0
    if answered_by == "smollm2":
        assert finished["model_loads"]["smollm2-135m"] >= 2  # the first load, and the restart on another node
    print(f"\n{when}, prefix reuse {prefix_reuse}: {removed - started:.0f} s to the loss, "
          f"{time.monotonic() - removed:.0f} s from it to the end; attempts {finished['attempts']}")  # fmt: skip
