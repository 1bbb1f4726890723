"""Packing pools onto nodes as Ray must place them."""

from __future__ import annotations

from ray_jobs.capacity import Node, demand, describe, fit, nodes_of_ray
from t2rag.pools import PoolShape, PoolSpec


def vllm(replicas: int, tp: int, accelerator: str | None = None) -> PoolSpec:
    return PoolSpec(
        "run", "generator", ("generate",), "m", PoolShape(replicas, float(tp), float(tp), 1, tp, accelerator), "vllm"
    )


def actors(n: int, cpus: float, gpus: float = 0.0) -> PoolSpec:
    return PoolSpec("evaluate", "queries", ("embed_queries",), "e", PoolShape(n, cpus, gpus))


def test_a_tensor_parallel_group_needs_its_gpus_on_one_node():
    two_small = [Node("a", 8, 1), Node("b", 8, 1)]
    assert fit([vllm(2, 1)], two_small).fits
    refused = fit([vllm(1, 2)], two_small)
    assert not refused.fits and "2 GPU on one node; the largest node has 8 CPUs and 1 GPUs" in refused.reason
    assert fit([vllm(1, 2)], [Node("big", 16, 2)]).fits


def test_pools_placed_at_once_share_the_nodes():
    node = [Node("n", 32, 8, "H100")]
    assert fit([vllm(6, 1, "H100"), actors(1, 1, 1), actors(1, 1, 1)], node).fits
    over = fit([vllm(7, 1, "H100"), actors(1, 1, 1), actors(1, 1, 1)], node)
    assert not over.fits and over.needed["GPU"] == 9 and over.available["GPU"] == 8
    assert "the pools placed before it hold the rest" in over.reason


def test_an_accelerator_type_and_a_cpu_for_tasks():
    assert "needs H100 GPUs and no node has them" in fit([vllm(1, 1, "H100")], [Node("n", 8, 1, "A100")]).reason
    full = fit([actors(2, 4.0)], [Node("n", 8, 0)])
    assert not full.fits and "no CPU for Ray Data's tasks" in full.reason
    assert fit([actors(2, 3.5)], [Node("n", 8, 0)]).fits


def test_a_replica_spanning_two_gpus_has_its_cpus_split_over_its_groups():
    """A replica of 2 GPUs at tensor parallel 1 is two single-GPU groups, each with half its CPUs: two nodes of
    one GPU and 4 CPUs hold it; whole, it would need 8 CPUs and 2 GPUs on one node."""
    replica = PoolSpec("run", "generator", ("generate",), "m", PoolShape(1, 8.0, 2.0, gpus_together=1), engine="vllm")
    nodes = [Node("a", 4.5, 1), Node("b", 4.5, 1)]
    assert fit([replica], nodes).fits
    assert not fit([replica], [Node("a", 3.5, 1), Node("b", 3.5, 1)]).fits  # 4 CPUs per group
    # Actors are never split, whatever their GPUs.
    assert not fit([actors(1, 2.0, 2.0)], nodes).fits
    assert not fit(
        [PoolSpec("run", "generator", ("generate",), "m", PoolShape(1, 2.0, 2.0), engine="llamacpp")], nodes
    ).fits


def test_larger_units_are_placed_first():
    """First fit in order of GPUs, then CPUs, largest first: 2-GPU groups placed after 1-GPU actors would find
    both nodes' GPUs split, and 5-CPU actors after a 4-CPU one would find a 5-CPU node taken."""
    assert fit([actors(2, 1, 1), vllm(2, 2)], [Node("a", 16, 3), Node("b", 16, 3)]).fits
    assert fit([actors(1, 4), actors(2, 5)], [Node("a", 5, 0), Node("b", 4, 0), Node("c", 6, 0)]).fits


def test_exactly_full_nodes_fit():
    assert fit([actors(1, 7, 1)], [Node("n", 8, 1)]).fits  # 7 CPUs + 1 for tasks, 1 GPU: exactly full
    assert not fit([actors(1, 7.5, 1)], [Node("n", 8, 1)]).fits


def test_what_a_refusal_says_and_counts():
    cluster = [Node("n", 8, 2, "H100")]
    alone = fit([vllm(3, 1, "H100")], cluster)
    assert (alone.fits, alone.pool.shape.actors, alone.needed, alone.available) == (
        False, 3, {"CPU": 4.0, "GPU": 3.0}, {"CPU": 8.0, "GPU": 2.0})  # fmt: skip
    assert alone.reason == "alone needs 3 GPUs; the cluster has 2"
    assert alone.message() == (
        "the run cannot be placed: the run pool 'generate (vllm, tensor parallel 1, m, 3 x 1 CPU + 1 GPU)' alone "
        "needs 3 GPUs; the cluster has 2 (the run asks for 4 CPUs and 3 GPUs; the cluster has 8 CPUs and 2 GPUs)"
    )
    exact = fit([vllm(2, 1, "H100"), actors(1, 1, 1)], cluster)  # each alone fits; together one GPU short
    assert exact.reason == "needs 1 CPU and 1 GPU on one node, and the pools placed before it hold the rest"
    big = fit([actors(1, 9)], [Node("a", 8, 0), Node("b", 8, 0)])
    assert big.reason == "needs 9 CPU on one node; the largest node has 8 CPUs and 0 GPUs"
    assert fit([actors(2, 4)], []).reason == "alone needs 8 CPUs; the cluster has 0"
    assert fit([actors(1, 0)], []).reason == "has no node to run on"
    # All of the cluster's GPUs, two of them taken first by another pool: not "alone".
    taken = fit([actors(1, 1, 1), vllm(2, 1, "H100")], cluster)
    assert taken.reason == "needs 1 CPU and 1 GPU on one node, and the pools placed before it hold the rest"
    one_gpu = fit([actors(1, 1, 1), actors(1, 1, 1)], [Node("n", 8, 1), Node("m", 1, 0)])
    assert one_gpu.reason == "needs 1 CPU and 1 GPU on one node, and the pools placed before it hold the rest"
    fours = fit([actors(2, 4)], [Node("a", 4, 0), Node("b", 2, 0), Node("c", 2, 0), Node("d", 1, 0)])
    assert fours.reason == "needs 4 CPU on one node, and the pools placed before it hold the rest"
    nothing = fit([], [Node("n", 0.5, 0)])
    assert (nothing.fits, nothing.pool, nothing.available) == (False, None, {"CPU": 0.5, "GPU": 0})
    tasks = fit([actors(1, 1), actors(2, 3.5)], [Node("n", 8, 0)])
    assert tasks.fits is False and tasks.pool == actors(2, 3.5)  # the last pool named
    assert tasks.needed == {"CPU": 9.0, "GPU": 0.0} and tasks.available == {"CPU": 8, "GPU": 0}
    ok = fit([actors(1, 1, 1)], cluster)
    assert ok.message() == "fits" and ok.needed == {"CPU": 2.0, "GPU": 1.0} and ok.available == {"CPU": 8, "GPU": 2}


def test_pools_are_described_in_a_few_words():
    assert describe(vllm(2, 4)) == "generate (vllm, tensor parallel 4, m, 2 x 4 CPU + 4 GPU)"
    light = PoolSpec("evaluate", "light", ("read_contexts", "answer_prompts"), None, PoolShape(3, 0.5, 0.0))
    assert describe(light) == "read_contexts+answer_prompts (3 x 0.5 CPU)"
    assert demand([light, vllm(2, 4)]) == {"CPU": 1.5 + 8 + 1, "GPU": 8}


def test_the_alive_nodes_of_a_cluster_as_ray_describes_them():
    described = [
        {"Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 16.0, "memory": 1e9}},
        {"Alive": True, "NodeManagerAddress": "10.0.0.2",
         "Resources": {"CPU": 192.0, "GPU": 8.0, "accelerator_type:H100": 1.0}},
        {"Alive": False, "NodeManagerAddress": "10.0.0.3", "Resources": {"CPU": 192.0, "GPU": 8.0}},
        {"Alive": True},  # a node that reports nothing yet
    ]  # fmt: skip
    assert nodes_of_ray(described) == [Node("10.0.0.1", 16.0, 0.0, None), Node("10.0.0.2", 192.0, 8.0, "H100"),
                                       Node("?", 0.0, 0.0, None)]  # fmt: skip
