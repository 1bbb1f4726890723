"""A run's lifecycle, the same for every runner: claim the output, find what is done, and finish with the result.

with claim_run(config, questions, overwrite) as done:  # validate, lock, list finished (method, id)
    ... a runner computes work_left(config, questions, done) and writes record blocks ...
    result = finish_run(config, log, started, "local", resources.data_description())
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.data import QuestionSet
from t2rag.errors import ConfigError, InputError, T2RagError, first_line, permanent_error
from t2rag.estimate.plan_vs_run import against_run
from t2rag.methods import get_method
from t2rag.pipeline.lock import run_lock
from t2rag.progress import StageLog
from t2rag.run_folder.files import (
    count_failed,
    done_keys,
    read_manifest,
    read_records,
    release_failed,
    write_manifest,
    write_result,
)
from t2rag.run_folder.manifest import build_manifest
from t2rag.run_folder.scorecards import METRIC_COLUMNS, USAGE_COLUMNS, generation_usage, scorecards_of
from t2rag.stages.route import require_two_subsets
from t2rag.storage import filesystem_for, is_s3

log = logging.getLogger("t2rag.progress")


def check_methods(config: RunConfig) -> None:
    """Refuse runs that would need a generator but have none."""
    if config.generator is not None:
        return
    if any(config.generates(m) for m in config.methods):
        raise ConfigError("generating answers needs a generator: pass --generator NAME or use --retrieval-only")
    for name in config.methods:
        if get_method(name).retrieval_needs_generator:
            raise ConfigError(f"method '{name}' needs a generator even for retrieval: pass --generator NAME")


def prepare_out(config: RunConfig, overwrite: bool) -> None:
    """Allow resuming a run of the same config; refuse (or, with overwrite, clear) results of another config."""
    try:
        previous = read_manifest(config.out)
    except InputError as exc:
        if not overwrite:
            raise ConfigError(f"{exc}; pass --overwrite to start this run again") from None
        previous = {"fingerprint": None}
    if previous is not None and previous.get("fingerprint") != config.fingerprint():
        if not overwrite:
            raise ConfigError(
                f"{config.out} holds results of a different configuration; choose another --out or pass --overwrite"
            )
        if is_s3(config.out):
            fs, path = filesystem_for(config.out)
            fs.delete_dir_contents(path, missing_dir_ok=True)
        else:
            shutil.rmtree(config.out, ignore_errors=True)
    # Claim the folder before any record is written, so a killed run can only be resumed by the same config.
    write_manifest(config.out, {"fingerprint": config.fingerprint(), "config": config.model_dump()})


@contextmanager
def claim_run(config: RunConfig, questions: QuestionSet, overwrite: bool = False) -> Iterator[set[tuple[str, str]]]:
    """Validate the run, then hold the output folder for its duration: yields the (method, id) pairs that already
    have records. Nothing is written before validation passes, so a corrected rerun is never refused."""
    check_methods(config)
    require_two_subsets(config.methods, list(questions.subsets))
    if questions.scored().num_rows == 0:
        raise InputError(f"{questions.source}: no question to score (the data is empty or every row is excluded)")
    with run_lock(config.out):
        prepare_out(config, overwrite)
        yield done_keys(config.out)


@dataclass
class Attempts:
    """How a run's attempts went: how many ran, rows whose failed generation was computed again, and rows that
    still failed after the last attempt (they count as wrong)."""

    attempts: int = 0
    retried: int = 0
    still_failed: int = 0
    faults: list[str] = field(default_factory=list)  # one line per attempt that ended in an error


class RunIncomplete(T2RagError):
    """Every attempt of a run ended in a fault; what was written is kept for a rerun."""


def run_attempts(
    config: RunConfig, max_attempts: int, pending: Callable[[set[tuple[str, str]]], int],
    compute: Callable[[set[tuple[str, str]]], None],
) -> Attempts:  # fmt: skip
    """Compute what is missing until nothing is, or `max_attempts` ran.

    Each attempt first releases the records whose generation failed for a reason a retry may fix
    (`release_failed`: a failed row is not done), then computes the rows without a record (`compute(done)`). An
    attempt that raises (a lost node, a dead engine, a failed job) is logged with what failed and how many rows are
    left, and the next one goes on; when the last one raises, the run ends with `RunIncomplete`. Errors no retry
    mends (`T2RagError`: a bad config, a model that cannot be loaded, also when a Ray worker raised it) and
    interrupts end the run at once."""
    stats = Attempts()
    for attempt in range(1, max_attempts + 1):
        released = release_failed(config.out)
        done = done_keys(config.out)
        left = pending(done)
        if attempt > 1 and left:
            log.warning("attempt %d of %d: %d rows left (%d released after a failed generation)", attempt,
                        max_attempts, left, released)  # fmt: skip
        stats.retried += released
        if left == 0:
            break
        stats.attempts = attempt
        try:
            compute(done)
        except (T2RagError, KeyboardInterrupt):
            raise
        except Exception as exc:
            permanent = permanent_error(exc)  # e.g. a model an actor could not load: the same in every attempt
            if permanent is not None:
                raise permanent from exc
            stats.faults.append(f"attempt {attempt}: {type(exc).__name__}: {first_line(exc)}")
            log.warning("attempt %d of %d failed: %s", attempt, max_attempts, stats.faults[-1])
            if attempt == max_attempts:
                remaining = pending(done_keys(config.out))
                raise RunIncomplete(
                    f"{config.out}: {remaining} rows left after {max_attempts} attempts (last: {stats.faults[-1]}); "
                    "rerun the same command to resume"
                ) from exc
            continue
        if not count_failed(config.out):
            break
    stats.still_failed = count_failed(config.out)
    if stats.still_failed:
        log.warning("%d rows still failed to generate after %d attempts; they count as wrong", stats.still_failed,
                    stats.attempts)  # fmt: skip
    return stats


def run_records(config: RunConfig, columns: list[str] | None = None) -> pa.Table:
    """The run's records of the configured methods; more than one record per (method, id) is an error."""
    records = read_records(config.out, columns)
    records = records.filter(pc.is_in(records.column("method"), pa.array(config.methods, pa.string())))
    counts = records.group_by(["method", "id"]).aggregate([("id", "count")])
    repeated = counts.filter(pc.greater(counts.column("id_count"), 1))
    if repeated.num_rows:
        first = repeated.slice(0, 1).to_pylist()[0]
        raise InputError(
            f"{config.out}: {repeated.num_rows} (method, id) pairs have more than one record, "
            f"e.g. ({first['method']}, {first['id']})"
        )
    return records


def finish_run(
    config: RunConfig,
    log: StageLog,
    started: float,
    runner: str,
    data: dict,
    attempts: Attempts | None = None,
    model_loads: dict[str, int] | None = None,
    plan: dict | None = None,
    **manifest_extra: object,
) -> dict:
    """Score the records, write the run folder's result and manifest, and return the result. `data` describes
    what was evaluated (`Resources.data_description`); both files carry it, with how the attempts went (rows
    retried, rows still failed) and how many times each model was loaded. The result's `generation` gives the
    prompt tokens per method and subset and the share the engine reused (`generation_usage`); `plan_vs_run` sets
    the plan of the rows the run started with (`t2rag.estimate.plan_vs_run.plan_of_run`) beside what it did."""
    columns = [*METRIC_COLUMNS, *USAGE_COLUMNS, "id", "completion_tokens", "generation_s"]
    records = run_records(config, list(dict.fromkeys(columns)))
    with log.stage("score", records.num_rows):
        scored = scorecards_of(records)
    result = {"methods": {m: scored[m] for m in config.methods if m in scored}, "data": data, "out": config.out}
    result["generation"] = generation_usage(records)
    result["attempts"] = asdict(attempts or Attempts())
    result["model_loads"] = model_loads or {}
    outside = config.plugins_used()
    if outside:  # what made the result, where not t2rag
        result["plugins"] = outside
    checked = against_run(plan, records, log.totals())
    if checked:
        result["plan_vs_run"] = checked
    tokens = {
        "prompt": int(pc.sum(records.column("prompt_tokens")).as_py() or 0),
        "completion": int(pc.sum(records.column("completion_tokens")).as_py() or 0),
        "cached_prompt": int(pc.sum(records.column("cached_prompt_tokens")).as_py() or 0),
    }
    write_result(config.out, result)
    manifest = build_manifest(config.model_dump(), config.fingerprint(), log.entries, log.totals(), tokens, started)
    manifest.update(runner=runner, data=data, attempts=result["attempts"], model_loads=result["model_loads"])
    if outside:
        manifest["plugins"] = outside
    if plan:
        manifest["plan"] = {k: v for k, v in plan.items() if k != "keys"}
    manifest.update(manifest_extra)
    write_manifest(config.out, manifest)
    return result
