"""Runs logged to MLflow, where teams keep their experiments (a sweep's parent run: t2rag.sweep.tracking).

A run is one MLflow run. Its params are its swept keys (a single run's: its methods, k, embedder and generator),
with the full resolved config as an artifact; its metrics
are every scorecard figure (`method.subset.figure`), its measured seconds and tokens and its plan's beside them; its
tags are t2rag's version and each plugin's origin and version; its report (written when it has none) is artifacts.
Logged from the finished run folder, so a sweep's trials and a `t2rag eval` log the same things. MLflow's own Ray
Tune callback logs a trial's Tune config and reported numbers, not a run folder; hence this module. mlflow is an
optional extra (`pip install 't2rag[track]'`).
"""

from __future__ import annotations

import json
import logging
import math
import re
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from t2rag.errors import ConfigError, T2RagError
from t2rag.run_folder.files import read_manifest, read_result
from t2rag.storage import join

log = logging.getLogger("t2rag.progress")

#: Where a run's or sweep's own MLflow store goes when the tracking block names no uri: a SQLite database and an
#: artifact folder under its out (MLflow 3 keeps its plain file store in maintenance and refuses it by default).
LOCAL_STORE = "mlflow.db"
LOCAL_ARTIFACTS = "mlartifacts"
#: Seconds a tracking server gets to answer before the run is refused.
REACH_TIMEOUT_S = 10


def tracking_uri(mlflow_cfg: Any, out: str) -> str:
    if mlflow_cfg.uri:
        return mlflow_cfg.uri
    return f"sqlite:///{Path(join(out, LOCAL_STORE)).resolve()}"


def require_mlflow() -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise ConfigError("tracking: mlflow is not installed: pip install 't2rag[track]'") from None


def check_tracking(tracking: Any, out: str) -> None:
    """Refuse, in one line, a tracking server that cannot be reached (before anything runs)."""
    if tracking is None or tracking.mlflow is None:
        return
    require_mlflow()
    uri = tracking_uri(tracking.mlflow, out)
    if not uri.startswith(("http://", "https://")):
        return
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=REACH_TIMEOUT_S) as response:
            response.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"tracking: the MLflow server at {uri} cannot be reached ({reason})") from None


def mlflow_client(mlflow_cfg: Any, out: str, default_experiment: str) -> tuple[Any, str]:
    """An MLflow client of the configured store and the id of the experiment runs go to (made when missing)."""
    require_mlflow()
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(mlflow_cfg, out)
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    name = mlflow_cfg.experiment or default_experiment
    found = client.get_experiment_by_name(name)
    own = Path(join(out, LOCAL_ARTIFACTS)).resolve().as_uri() if mlflow_cfg.uri is None else None
    experiment_id = found.experiment_id if found else client.create_experiment(name, artifact_location=own)
    return client, experiment_id


def metric_key(text: str) -> str:
    """MLflow keys allow letters, digits and `_-./ `: `mrr@3` becomes `mrr_at_3`."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", text.replace("@", "_at_"))


def run_metrics(run: str) -> dict[str, float]:
    """Every figure of a run folder: the scorecards, the measured seconds and tokens, the plan beside them."""
    result = read_result(run) or {}
    manifest = read_manifest(run) or {}
    out: dict[str, float] = {}
    for method, card in result.get("methods", {}).items():
        for subset, entry in [("weighted", card["weighted"]), *card["subsets"].items()]:
            for figure, value in entry.items():
                if isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value):
                    out[metric_key(f"{method}.{subset}.{figure}")] = float(value)
    if manifest.get("wall_s") is not None:
        out["run.seconds"] = float(manifest["wall_s"])
    for kind, n in (manifest.get("tokens") or {}).items():
        out[metric_key(f"run.tokens.{kind}")] = float(n)
    for key, value in (manifest.get("plan") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[metric_key(f"plan.{key}")] = float(value)
    return out


def run_tags(run: str) -> dict[str, str]:
    manifest = read_manifest(run) or {}
    try:
        own = version("t2rag")
    except PackageNotFoundError:
        own = "unknown"
    tags = {"t2rag.version": own, "t2rag.fingerprint": str(manifest.get("fingerprint", "")),
            "t2rag.runner": str(manifest.get("runner", ""))}  # fmt: skip
    for kind, named in (manifest.get("plugins") or {}).items():
        for name, origin in named.items():
            tags[metric_key(f"plugin.{kind}.{name}")] = f"{origin.get('source')} {origin.get('version') or ''}".strip()
    return tags


def log_run_folder(client: Any, experiment_id: str, run: str, name: str, params: dict[str, Any],
                   parent: str | None = None) -> str:  # fmt: skip
    """One MLflow run of a finished run folder (nested under `parent`); returns its id."""
    from mlflow.entities import Metric, Param

    tags = run_tags(run)
    if parent is not None:
        tags["mlflow.parentRunId"] = parent
    mlrun = client.create_run(experiment_id, run_name=name, tags=tags)
    run_id = mlrun.info.run_id
    params_list = [Param(metric_key(k), _text(v)[:6000]) for k, v in params.items()]
    metrics = [Metric(k, v, 0, 0) for k, v in run_metrics(run).items()]
    client.log_batch(run_id, metrics=metrics, params=params_list)
    manifest = read_manifest(run) or {}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "config.json").write_text(json.dumps(manifest.get("config", {}), indent=1))
        Path(tmp, "result.json").write_text(json.dumps(read_result(run) or {}, indent=1))
        client.log_artifact(run_id, str(Path(tmp, "config.json")))
        client.log_artifact(run_id, str(Path(tmp, "result.json")))
    report = run_report(run)
    if report is not None:
        client.log_artifacts(run_id, report, "report")
    client.set_terminated(run_id)
    return run_id


def run_report(run: str) -> str | None:
    """The run's report folder, written first when it has none (`t2rag report`'s tables and plots); None when the
    run is on S3 or its report cannot be made (the run is still logged, without it)."""
    from t2rag.results.report import write_report
    from t2rag.run_folder.files import report_dir

    folder = report_dir(run)
    if run.startswith("s3://"):
        return None
    if not Path(folder).is_dir():
        try:
            write_report(run)
        except T2RagError as exc:
            log.warning("tracking: %s: no report to log (%s)", run, exc)
            return None
    return folder


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def log_single_run(config: Any, run: str) -> str | None:
    """Log a `t2rag eval` run when its config has a `tracking: {mlflow: ...}` block; returns the MLflow run id."""
    tracking = getattr(config, "tracking", None)
    if tracking is None or tracking.mlflow is None:
        return None
    client, experiment_id = mlflow_client(tracking.mlflow, run, config.name)
    generator = config.generator
    params = {"methods": config.methods, "retrieval.k": config.retrieval.k,
              "retrieval.embedder.model": config.retrieval.embedder.model,
              "generator": getattr(generator, "preset", None) or getattr(generator, "model", None)}  # fmt: skip
    return log_run_folder(client, experiment_id, run, config.name, params)
