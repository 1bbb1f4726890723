"""A sweep logged to MLflow: a parent run with one nested run per finished trial (t2rag.results.tracking logs each
trial's run folder as it logs a single run)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from t2rag.results.tracking import log_run_folder, mlflow_client, tracking_uri
from t2rag.run_folder.files import read_manifest
from t2rag.storage import join
from t2rag.sweep.table import TABLE_FILES

log = logging.getLogger("t2rag.progress")


def log_sweep(sweep: Any, table: Any) -> str | None:
    """The sweep as a parent MLflow run and each finished trial as a run nested in it; returns the parent's id.

    A trial already logged (an MLflow run of the sweep with its name and fingerprint) is not logged again, so a
    resumed sweep adds only what it computed."""
    mlflow_cfg = sweep.spec.tracking.mlflow
    if mlflow_cfg is None:
        return None
    client, experiment_id = mlflow_client(mlflow_cfg, sweep.out, sweep.spec.name)
    found = client.search_runs([experiment_id], filter_string=f"tags.`t2rag.sweep` = '{sweep.spec.name}'")
    parent = found[0].info.run_id if found else client.create_run(
        experiment_id, run_name=sweep.spec.name, tags={"t2rag.sweep": sweep.spec.name}).info.run_id  # fmt: skip
    if not found:
        client.log_param(parent, "swept", ",".join(sweep.swept))
        client.log_param(parent, "objective", json.dumps(sweep.spec.objective.model_dump()))
    logged = {
        (r.data.tags.get("mlflow.runName"), r.data.tags.get("t2rag.fingerprint"))
        for r in client.search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent}'")
    }
    for row in table.rows:
        if row.status != "finished":
            continue
        fingerprint = (read_manifest(row.out) or {}).get("fingerprint")
        if (row.trial, str(fingerprint)) in logged:
            continue
        log_run_folder(client, experiment_id, row.out, row.trial, row.values, parent)
    if table.best is not None:
        client.set_tag(parent, "t2rag.best", table.best)
    for kind in ("csv", "markdown", "json"):
        path = Path(join(sweep.out, TABLE_FILES[kind]))
        if path.exists():
            client.log_artifact(parent, str(path))
    client.set_terminated(parent)
    log.info("sweep: logged to MLflow at %s (experiment %s)", tracking_uri(mlflow_cfg, sweep.out),
             mlflow_cfg.experiment or sweep.spec.name)  # fmt: skip
    return parent
