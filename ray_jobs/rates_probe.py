"""`t2rag rates measure` on a Ray cluster: the probe as one task holding what a generator replica holds, so it runs
on a node of the kind the generator's pool will use (its GPUs and accelerator type)."""

from __future__ import annotations

from ray_jobs.common import ray_session
from t2rag.config import RunConfig
from t2rag.estimate.rates import Rates
from t2rag.generation.registry import engine_of


def measure_on_cluster(config: RunConfig) -> Rates:
    """`t2rag.estimate.calibrate.measure_rates` in a task placed like one generator replica."""
    import ray

    from t2rag.estimate.calibrate import measure_rates

    placement = engine_of(config.generator).placement(config.generator)
    options: dict = {"num_cpus": placement.cpus, "num_gpus": placement.gpus}
    if placement.accelerator:
        options["accelerator_type"] = placement.accelerator
    if placement.runtime_env:
        options["runtime_env"] = placement.runtime_env
    with ray_session(config.ray):
        task = ray.remote(measure_rates).options(**options)
        return ray.get(task.remote(config))
