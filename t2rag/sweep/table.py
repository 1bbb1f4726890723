"""A sweep's table: one row per trial (its swept values, its figures, its time, tokens and cost), the best trial
by the objective with a paired test against the runner-up, and the trials on the Pareto frontier of quality
against cost. Read from the trials' run folders, so it is the same whether the trials ran now or long ago."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from t2rag.errors import InputError, T2RagError
from t2rag.run_folder.files import read_manifest, read_result
from t2rag.storage import join, read_bytes, write_bytes
from t2rag.sweep.spec import ANSWER_FIGURES, RETRIEVAL_FIGURES, SWEEP_FILE, TRIALS_DIR, Objective

#: The key Tune optimises and reports: the objective's figure of the trial.
OBJECTIVE = "objective"
TABLE_FILES = {"csv": "table.csv", "markdown": "table.md", "json": "table.json"}


def objective_method(objective: Objective, methods: list[str]) -> str:
    return objective.method or methods[0]


def trial_figures(result: dict, objective: Objective, methods: list[str]) -> dict[str, float]:
    """Every scorecard figure of a run's result as `method/subset/figure`, and the objective's under `objective`."""
    flat: dict[str, float] = {}
    for method, card in result["methods"].items():
        for subset, entry in [("weighted", card["weighted"]), *card["subsets"].items()]:
            for figure, value in entry.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    flat[f"{method}/{subset}/{figure}"] = float(value)
    key = f"{objective_method(objective, methods)}/{objective.subset}/{objective.metric}"
    value = flat.get(key)
    flat[OBJECTIVE] = value if value is not None and not math.isnan(value) else float("nan")
    return flat


@dataclass
class TrialRow:
    """One trial of the table."""

    trial: str
    values: dict[str, Any]
    status: str  # finished, failed, not run
    out: str
    method: str = ""
    figures: dict[str, float] = field(default_factory=dict)  # the objective method's figures the table shows
    objective: float | None = None
    seconds: float | None = None  # the measured wall time of the session that finished the run
    prompt_tokens: int = 0
    completion_tokens: int = 0
    gpu_seconds: float | None = None  # the seconds times the GPUs it held (`gpu_cost`)
    cost: float | None = None
    error: str | None = None
    final: bool = False


@dataclass
class SweepTable:
    name: str
    swept: list[str]
    objective: Objective
    rows: list[TrialRow]
    best: str | None = None
    runner_up: str | None = None
    best_vs_runner_up: dict | None = None  # the paired test of the objective's figure
    pareto: list[str] = field(default_factory=list)  # trials no other beats on quality and cost both
    model_loads: dict[str, int] = field(default_factory=dict)  # every load of the sweep's runs, by model

    def to_dict(self) -> dict:
        out = asdict(self)
        out["objective"] = self.objective.model_dump()
        return out


def read_trial(out: str, name: str, values: dict[str, Any], spec: Any, error: str | None) -> TrialRow:
    """One trial's row from its run folder (a trial without a result is failed or not run)."""
    objective = spec.objective
    run = join(out, TRIALS_DIR, name)
    row = TrialRow(name, values, "not run", run, error=error)
    try:
        result = read_result(run)
        manifest = read_manifest(run) or {}
    except (InputError, OSError):
        result, manifest = None, {}
    if result is None:
        row.status = "failed" if error else "not run"
        return row
    methods = list(result["methods"])
    row.method = objective_method(objective, methods)
    row.figures = shown_figures(result["methods"].get(row.method), spec.table)
    value = trial_figures(result, objective, methods)[OBJECTIVE]
    row.objective = None if math.isnan(value) else value
    row.status = "finished"
    row.error = None
    row.seconds = manifest.get("wall_s")
    tokens = manifest.get("tokens") or {}
    row.prompt_tokens, row.completion_tokens = tokens.get("prompt", 0), tokens.get("completion", 0)
    row.gpu_seconds, row.cost = gpu_cost(manifest.get("config") or {}, row.seconds)
    row.final = bool(manifest.get("final"))
    return row


def gpu_cost(config: dict, seconds: float | None) -> tuple[float | None, float | None]:
    """GPU-seconds a trial held (its measured seconds times the GPUs of one replica of its generator, or of its
    embedder when it generates nothing) and their cost at its `estimate.price_per_gpu_hour` (None: no price)."""
    from pydantic import ValidationError

    from t2rag.config import RunConfig
    from t2rag.generation.registry import engine_of

    try:
        run = RunConfig.model_validate(config)
    except (ValidationError, T2RagError):  # a plugin's config this process cannot read
        return None, None
    if seconds is None:
        return None, None
    gpus = run.ray.embed_gpus
    if run.generator is not None and any(run.generates(m) for m in run.methods):
        gpus = engine_of(run.generator).placement(run.generator).gpus
    price = run.estimate.price_per_gpu_hour
    gpu_s = seconds * gpus
    return gpu_s, None if price is None else gpu_s / 3600 * price


def read_sweep_manifest(out: str) -> dict:
    held = read_bytes(join(out, SWEEP_FILE))
    if held is None:
        raise InputError(f"{out}: not a sweep folder (no {SWEEP_FILE})")
    return json.loads(held)


def shown_figures(card: dict | None, table: Any) -> dict[str, float]:
    """The figures of a method's scorecard the table shows (`TableSpec`)."""
    if card is None:
        return {}
    names = table.figures or [*RETRIEVAL_FIGURES, *ANSWER_FIGURES]
    if not table.by_subset:
        return {k: card["weighted"][k] for k in names if k in card["weighted"]}
    parts = [*card["subsets"].items(), ("weighted", card["weighted"])]
    return {f"{subset} {k}": entry[k] for subset, entry in parts for k in names if k in entry}


def trial_names(out: str) -> dict[str, dict[str, Any]]:
    """The sweep's trials (name: swept values): the grid's from its manifest, a search's as they were written."""
    manifest = read_sweep_manifest(out)
    names = {t["name"]: t["values"] for t in manifest.get("trials", [])}
    for t in [*manifest.get("searched", []), *manifest.get("final", [])]:
        names.setdefault(t["name"], t["values"])
    return names


def sweep_table(sweep_or_out: Any, errors: dict[str, str] | None = None) -> SweepTable:
    """The table of a sweep (a `Sweep`, or its out folder), written beside its trials as CSV, markdown and JSON."""
    from t2rag.sweep.spec import SweepFile

    out = sweep_or_out if isinstance(sweep_or_out, str) else sweep_or_out.out
    manifest = read_sweep_manifest(out)
    spec = SweepFile.model_validate(manifest["spec"])
    errors = {**manifest.get("errors", {}), **(errors or {})}
    names = trial_names(out)
    rows = [read_trial(out, name, values, spec, errors.get(name)) for name, values in names.items()]
    table = SweepTable(spec.name, manifest.get("swept", []), spec.objective, rows)
    table.model_loads = manifest.get("model_loads", {})
    choose_best(table, out)
    table.pareto = pareto(rows, spec.objective.mode)
    write_table(out, table)
    manifest["errors"] = {k: v for k, v in errors.items() if not any(r.trial == k and r.status == "finished"
                                                                       for r in rows)}  # fmt: skip
    write_bytes(join(out, SWEEP_FILE), json.dumps(manifest, indent=1, default=str).encode())
    return table


def ranked(rows: list[TrialRow], mode: str) -> list[TrialRow]:
    """Trials by the objective, best first; of equal ones the faster first."""
    scored = [r for r in rows if r.objective is not None and not r.final]
    sign = 1.0 if mode == "min" else -1.0
    return sorted(scored, key=lambda r: (sign * r.objective, r.seconds if r.seconds is not None else math.inf))


def choose_best(table: SweepTable, out: str) -> None:
    """The best trial by the objective, and the paired test of its figure against the runner-up's."""
    order = ranked(table.rows, table.objective.mode)
    if not order:
        return
    table.best = order[0].trial
    if len(order) < 2:
        return
    best, second = order[0], order[1]
    table.runner_up = second.trial
    from t2rag.results.compare import compare_runs

    try:
        found = compare_runs(f"{best.out}:{best.method}", f"{second.out}:{second.method}")
    except T2RagError as exc:
        table.best_vs_runner_up = {"error": str(exc)}
        return
    for d in found:
        if d.metric == table.objective.metric and d.subset == table.objective.subset:
            table.best_vs_runner_up = d.as_dict()


def pareto(rows: list[TrialRow], mode: str) -> list[str]:
    """Trials no other trial matches or beats on both the objective and the cost (seconds) with one strictly
    better."""
    points = [r for r in rows if r.objective is not None and r.seconds is not None and not r.final]
    sign = 1.0 if mode == "max" else -1.0
    front = []
    for r in points:
        dominated = any(
            sign * o.objective >= sign * r.objective
            and o.seconds <= r.seconds  # type: ignore[operator]
            and (sign * o.objective > sign * r.objective or o.seconds < r.seconds)  # type: ignore[operator]
            for o in points
        )
        if not dominated:
            front.append(r.trial)
    return front


def table_rows(table: SweepTable) -> tuple[list[str], list[list[Any]]]:
    figures = list(dict.fromkeys(f for r in table.rows for f in r.figures))
    header = ["trial", *table.swept, "status", "method", *figures, "objective", "seconds", "prompt_tokens",
              "completion_tokens", "gpu_seconds", "cost", "best", "pareto", "final", "error"]  # fmt: skip
    rows = []
    for r in table.rows:
        rows.append([r.trial, *(_cell(r.values.get(k)) for k in table.swept), r.status, r.method,
                     *(r.figures.get(f) for f in figures), r.objective, r.seconds, r.prompt_tokens,
                     r.completion_tokens, r.gpu_seconds, r.cost, r.trial == table.best, r.trial in table.pareto,
                     r.final, r.error or ""])  # fmt: skip
    return header, rows


def _cell(value: Any) -> Any:
    return "+".join(map(str, value)) if isinstance(value, list) else value


def write_table(out: str, table: SweepTable) -> dict[str, str]:
    import csv
    import io

    from t2rag.results.tables import markdown_table

    header, rows = table_rows(table)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(["" if v is None else v for v in row] for row in rows)
    paths = {kind: join(out, name) for kind, name in TABLE_FILES.items()}
    write_bytes(paths["csv"], buf.getvalue().encode())
    write_bytes(paths["markdown"], (markdown_table(header, rows) + "\n").encode())
    write_bytes(paths["json"], json.dumps(table.to_dict(), indent=1, default=str).encode())
    return paths
