"""Packing pools onto nodes as Ray must place them."""

from __future__ import annotations

from ray_jobs.capacity import Node, fit
from ray_jobs.pools import PoolSpec


def vllm(replicas: int, tp: int, accelerator: str | None = None) -> PoolSpec:
    return PoolSpec("run", "generator", ("generate",), "vllm", "m", replicas, float(tp), float(tp), tp, accelerator)


def actors(n: int, cpus: float, gpus: float = 0.0) -> PoolSpec:
    return PoolSpec("evaluate", "queries", ("embed_queries",), "actors", "e", n, cpus, gpus)


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
