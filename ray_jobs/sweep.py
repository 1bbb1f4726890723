"""A sweep as one Ray Tune experiment: every trial an ordinary run folder, resumable, tracked, tabled.

    python -m ray_jobs.sweep configs/sweeps/embedders.yaml [--address ADDR] [--yes]     (also: t2rag sweep FILE)

Each trial runs the lifecycle's single-process runner inside its Tune trial actor, at most `max_concurrent` at once.
Trials that answer with one generator send their generations to one generator service the sweep starts
(`ray_jobs.generator_service`: the model loads once per replica for the whole sweep), and ask Tune for one CPU.
Trials that search one corpus with one embedder share its embedded passages (one vector table, built once under a
lock: `t2rag.retrieval.dense.vector_store`), and a trial actor is reused by the next trial, so what it loaded stays
loaded. A sweep stopped anywhere resumes with the same command: Tune's experiment restore skips finished trials, a
trial whose folder holds its finished result is not run again, and a trial cut short resumes from its records.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
from typing import Any

from ray_jobs.common import ray_session, read_meter, stage_meter
from t2rag.config import RunConfig
from t2rag.errors import ConfigError, T2RagError, first_line
from t2rag.quiet import quiet_libraries
from t2rag.storage import join, read_bytes, write_bytes
from t2rag.sweep.spec import SWEEP_FILE, TUNE_DIR, Sweep, Trial, load_sweep
from t2rag.sweep.table import OBJECTIVE, SweepTable, sweep_table, trial_figures

log = logging.getLogger("t2rag.progress")


def generator_key(config: RunConfig) -> str | None:
    """What makes two trials' generators one service (None: the trial generates nothing)."""
    if config.generator is None or not any(config.generates(m) for m in config.methods):
        return None
    return config.generator.model_dump_json()


def trial_resources(config: RunConfig, shared: bool) -> dict[str, float]:
    """What one trial asks Tune for: one CPU when its generation goes to the sweep's shared service (or it has
    none), else one replica of its generator's placement."""
    if shared or generator_key(config) is None:
        return {"cpu": 1.0}
    from t2rag.generation.registry import engine_of

    shape = engine_of(config.generator).placement(config.generator)
    return {"cpu": max(1.0, shape.cpus), "gpu": shape.gpus}


def run_trial(params: dict[str, Any], sweep: Sweep, services: dict[str, list]) -> None:
    """A Tune trainable: the trial's run (resuming from its records when it has some), then its figures. Its
    generations go to the sweep's service for its generator (`services`: generator key to replica handles)."""
    from ray import tune

    from ray_jobs.common import count_loads_on_meter
    from t2rag.pipeline.local import LocalRunner

    count_loads_on_meter()  # the sweep counts every model load of its trials
    trial = trial_of(sweep, params)
    config = trial.config.model_copy(update={"runner": "local"})
    started = time.time()
    result = finished_result(config)
    if result is None:
        replicas = services.get(generator_key(config) or "")
        stages = {"generate": service_client(config, replicas)} if replicas else None
        result = LocalRunner(config, stages=stages).run()
    figures = trial_figures(result, sweep.spec.objective, config.methods)
    tune.report({**figures, "trial": trial.name, "trial_seconds": time.time() - started})


def service_client(config: RunConfig, replicas: list):
    """The `generate` stage of a trial whose generations go to the sweep's service (the same columns in and out as
    `Generate`, which the replicas run)."""
    from ray_jobs.generator_service import ServiceClient
    from t2rag.stages.generate import Generate

    ray_cfg = config.ray
    client = ServiceClient(replicas, ray_cfg.engine_timeout_s, ray_cfg.generate_attempts,
                           restart_s=ray_cfg.generator_restart_s, model=config.generator.model)  # fmt: skip

    class SharedGenerate(Generate):
        def __init__(self) -> None:  # holds no generator of its own
            self.config = config

        def __call__(self, batch):
            return client(batch)

    return SharedGenerate()


@contextlib.contextmanager
def shared_generators(sweep: Sweep):
    """One generator service per distinct generator of the grid's trials, for the whole sweep: its model loads
    once per replica, whatever number of trials answer with it. Yields generator key to replica handles."""
    from ray_jobs.generator_service import GeneratorService

    configs: dict[str, RunConfig] = {}
    for trial in sweep.trials or [sweep.trial({})]:
        key = generator_key(trial.config)
        if key is not None:
            configs.setdefault(key, trial.config)
    with contextlib.ExitStack() as stack:
        services = {key: stack.enter_context(GeneratorService(c)) for key, c in configs.items()}
        yield {key: service.replicas for key, service in services.items()}


def finished_result(config: RunConfig) -> dict | None:
    """The result of a trial that already finished with this config (a rerun's Tune lost its state), else None."""
    from t2rag.run_folder.files import read_manifest, read_result

    try:
        result, manifest = read_result(config.out), read_manifest(config.out)
    except T2RagError:
        return None
    if result is None or manifest is None or manifest.get("fingerprint") != config.fingerprint():
        return None
    return result


def trial_of(sweep: Sweep, params: dict[str, Any]) -> Trial:
    if "trial" in params:  # a grid: the trial's name
        return next(t for t in sweep.trials if t.name == params["trial"])
    assert sweep.spec.search is not None
    values = {}
    for key in sweep.swept:
        value = params[key]
        space = sweep.spec.search.space.get(key)
        values[key] = round(value) if space is not None and space.integer else value
    return sweep.trial(values)


def param_space(sweep: Sweep) -> dict[str, Any]:
    from ray import tune

    if sweep.spec.search is None:
        return {"trial": tune.grid_search([t.name for t in sweep.trials])}
    space: dict[str, Any] = {key: tune.choice(values) for key, values in sweep.spec.grid.items()}
    for key, r in sweep.spec.search.space.items():
        if r.choices is not None:
            space[key] = tune.choice(r.choices)
        elif r.integer:
            space[key] = (tune.lograndint if r.log else tune.randint)(int(r.low), int(r.high) + 1)
        else:
            space[key] = (tune.loguniform if r.log else tune.uniform)(r.low, r.high)
    return space


def search_algorithm(sweep: Sweep):
    """Optuna through Tune's search API (its TPE sampler, seeded), or None: Tune's random sampling."""
    search = sweep.spec.search
    if search is None or search.algorithm == "random":
        return None
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.optuna import OptunaSearch

    try:
        import optuna
    except ImportError:
        raise ConfigError("search: algorithm optuna needs optuna: pip install 't2rag[track]'") from None
    sampler = optuna.samplers.TPESampler(seed=search.seed)
    return ConcurrencyLimiter(OptunaSearch(sampler=sampler), max_concurrent=sweep.spec.max_concurrent)


def count_trials(sweep: Sweep) -> int:
    return sweep.spec.search.trials if sweep.spec.search else len(sweep.trials)


def check_size(sweep: Sweep, yes: bool) -> None:
    n = count_trials(sweep)
    if n > sweep.spec.max_trials and not yes:
        raise ConfigError(f"the sweep has {n} trials, more than max_trials {sweep.spec.max_trials}: pass --yes")


def claim_sweep(sweep: Sweep) -> None:
    """Write the sweep's manifest, or check that its folder holds this same sweep (a rerun resumes it)."""
    manifest = {"name": sweep.spec.name, "spec": sweep.spec.model_dump(), "swept": sweep.swept,
                "trials": [t.to_dict() for t in sweep.trials]}  # fmt: skip
    path = join(sweep.out, SWEEP_FILE)
    held = read_bytes(path)
    if held is not None:
        before = json.loads(held)
        if before.get("spec") != manifest["spec"]:
            raise ConfigError(f"{sweep.out} holds another sweep ({before.get('name')}); choose another out")
        manifest = {**before, **manifest}
    write_bytes(path, json.dumps(manifest, indent=1, default=str).encode())


def run_sweep(sweep: Sweep, address: str | None = None, yes: bool = False) -> SweepTable:
    """Run (or resume) every trial of the sweep on Ray Tune and write its table; returns the table."""
    from t2rag.results.tracking import check_tracking
    from t2rag.sweep.tracking import log_sweep

    check_size(sweep, yes)
    check_tracking(sweep.spec.tracking, sweep.out)  # an unreachable tracking server: refused before any trial
    claim_sweep(sweep)
    base = (sweep.trials[0] if sweep.trials else sweep.trial({})).config
    ray_cfg = base.ray.model_copy(update={"address": address}) if address else base.ray
    storage = join(sweep.out, TUNE_DIR)
    with ray_session(ray_cfg):
        meter = stage_meter()
        read_meter(meter, "reset")
        grid = fit_trials(sweep, storage)
        loads = read_meter(meter, "model_loads")
    errors, searched = {}, []
    for result in grid:
        name = trial_name_of(sweep, result.config)
        if sweep.spec.search is not None:
            searched.append({"name": name, "values": trial_of(sweep, result.config).values})
        if result.error is not None:
            cause = getattr(result.error, "cause", None) or result.error  # the trial's own error, not Ray's wrapper
            errors[name] = f"{type(cause).__name__}: {first_line(cause)}"
    if searched:
        record_searched(sweep, searched)
    record_loads(sweep, loads)
    table = sweep_table(sweep, errors)
    log_sweep(sweep, table)
    return table


def progress_callback(sweep: Sweep):
    """A Tune callback that prints one line per trial that ends: how many are done, its objective or its error."""
    from ray.tune import Callback

    total = count_trials(sweep)

    class SweepProgress(Callback):
        def __init__(self) -> None:
            self.ended = 0

        def on_trial_complete(self, iteration, trials, trial, **info) -> None:
            self.ended += 1
            value = (trial.last_result or {}).get(OBJECTIVE)
            name = trial_name_of(sweep, trial.config)
            log.info("sweep: %d/%d trials ended; %s: %s %s", self.ended, total, name, sweep.spec.objective.metric,
                     "n/a" if value is None else f"{value:.2f}")  # fmt: skip

        def on_trial_error(self, iteration, trials, trial, **info) -> None:
            self.ended += 1
            log.info("sweep: %d/%d trials ended; %s failed (the next run of the command retries it)", self.ended,
                     total, trial_name_of(sweep, trial.config))  # fmt: skip

    return SweepProgress()


def fit_trials(sweep: Sweep, storage: str):
    """The Tune experiment of the sweep (restored when a stopped one is there), with its shared generators."""
    from ray import tune

    with shared_generators(sweep) as services:

        def resources(params: dict[str, Any]) -> dict[str, float]:
            config = trial_of(sweep, params).config
            return trial_resources(config, shared=generator_key(config) in services)

        trainable = tune.with_resources(tune.with_parameters(run_trial, sweep=sweep, services=services), resources)
        experiment = join(storage, "experiment")
        if tune.Tuner.can_restore(experiment):
            log.info("sweep: resuming %s (finished trials are kept, errored ones retried)", experiment)
            tuner = tune.Tuner.restore(experiment, trainable, resume_unfinished=True, resume_errored=False,
                                       restart_errored=True, param_space=param_space(sweep))  # fmt: skip
        else:
            tuner = tune.Tuner(
                trainable,
                param_space=param_space(sweep),
                tune_config=tune.TuneConfig(
                    metric=OBJECTIVE,
                    mode=sweep.spec.objective.mode,
                    search_alg=search_algorithm(sweep),
                    num_samples=sweep.spec.search.trials if sweep.spec.search else 1,
                    max_concurrent_trials=sweep.spec.max_concurrent,
                    reuse_actors=True,
                    trial_dirname_creator=lambda t: f"{t.trial_id}-{trial_name_of(sweep, t.config)}"[:80],
                ),
                run_config=tune.RunConfig(
                    name="experiment",
                    storage_path=storage,
                    failure_config=tune.FailureConfig(max_failures=0, fail_fast=False),
                    callbacks=[progress_callback(sweep)],
                    verbose=0,
                ),
            )
        return tuner.fit()


def run_final(sweep: Sweep, name: str, split: str) -> dict:
    """Evaluate one chosen trial's config once on the held-out `split`, into `trials/NAME.final`, marked final in
    its manifest and in the sweep's table. A second call finds the run done and only rescores it."""
    from t2rag.pipeline.local import run_local
    from t2rag.run_folder.files import read_manifest, write_manifest

    if read_bytes(join(sweep.out, SWEEP_FILE)) is None:
        raise ConfigError(f"{sweep.out}: the sweep has not run yet; run it, then choose a trial")
    from t2rag.sweep.table import read_sweep_manifest

    manifest = read_sweep_manifest(sweep.out)
    known = {t["name"]: t["values"] for t in [*manifest.get("trials", []), *manifest.get("searched", [])]}
    if name not in known:
        raise ConfigError(f"no trial {name} in {sweep.out} (trials: {', '.join(list(known)[:5])}, ...)")
    trial = sweep.trial(known[name])
    data = trial.config.data.model_copy(update={"split": split})
    final_name = f"{name}.final"
    config = trial.config.model_copy(update={"data": data, "out": join(sweep.out, "trials", final_name),
                                             "runner": "local"})  # fmt: skip
    result = run_local(config)
    run_manifest = read_manifest(config.out) or {}
    write_manifest(config.out, {**run_manifest, "final": True, "split": split})
    finals = [t for t in manifest.get("final", []) if t["name"] != final_name]
    manifest["final"] = [*finals, {"name": final_name, "values": {**known[name], "data.split": split}}]
    write_bytes(join(sweep.out, SWEEP_FILE), json.dumps(manifest, indent=1, default=str).encode())
    sweep_table(sweep.out)
    return result


def record_loads(sweep: Sweep, loads: dict[str, int]) -> None:
    """Add this sweep run's model loads (every trial's and every shared generator replica's) to its manifest."""
    path = join(sweep.out, SWEEP_FILE)
    manifest = json.loads(read_bytes(path) or b"{}")
    total = manifest.get("model_loads", {})
    for model, n in loads.items():
        total[model] = total.get(model, 0) + n
    manifest["model_loads"] = total
    write_bytes(path, json.dumps(manifest, indent=1, default=str).encode())


def record_searched(sweep: Sweep, searched: list[dict]) -> None:
    """Add a search's trials to the sweep's manifest (a search's trials are known only as they run)."""
    path = join(sweep.out, SWEEP_FILE)
    manifest = json.loads(read_bytes(path) or b"{}")
    known = {t["name"] for t in manifest.get("searched", [])}
    manifest["searched"] = [*manifest.get("searched", []), *(t for t in searched if t["name"] not in known)]
    write_bytes(path, json.dumps(manifest, indent=1, default=str).encode())


def trial_name_of(sweep: Sweep, params: dict[str, Any]) -> str:
    try:
        return trial_of(sweep, params).name
    except (T2RagError, StopIteration, KeyError):
        return str(params)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep")
    parser.add_argument("--address", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--yes", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet_libraries()
    try:
        sweep = load_sweep(args.sweep, args.out)
        with contextlib.redirect_stdout(sys.stderr):
            table = run_sweep(sweep, args.address, args.yes)
    except Exception as exc:
        print(f"ray_jobs.sweep: error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, T2RagError) else 1
    print(json.dumps(table.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
