"""Data, LanceDB indexes, records and reports on S3 (a moto server on loopback, over real HTTP)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import boto3
import pytest

from ray_jobs.evaluate import run_ray
from t2rag.config import load_config
from t2rag.pipeline.local import run_local
from t2rag.report import write_report
from tests.conftest import upload_dir

pytestmark = pytest.mark.slow


@pytest.fixture
def ray_with_s3_env(s3_server):
    import ray

    ray.shutdown()
    keys = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ALLOW_HTTP")
    import os

    ray.init(
        num_cpus=8,
        object_store_memory=300 * 2**20,
        include_dashboard=False,
        runtime_env={"env_vars": {k: os.environ[k] for k in keys}},
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


def _keys(bucket: str, prefix: str) -> list[str]:
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_everything_on_s3(ray_with_s3_env, s3_bucket, tiny_data, tmp_path, caplog):
    data_uri = upload_dir(Path(tiny_data), s3_bucket, "t2ragbench")
    fields = {
        "data": {"source": data_uri},
        "methods": ["bm25", "base", "hybrid_bm25"],
        "retrieval_only": True,
        "retrieval": {"index_uri": f"s3://{s3_bucket}/lancedb"},
        "ray": {"block_rows": 8},
    }
    caplog.set_level(logging.INFO)
    distributed = run_ray(load_config(None, {**fields, "engine": "ray", "out": f"s3://{s3_bucket}/runs/ray"}))
    local = run_local(load_config(None, {**fields, "out": f"s3://{s3_bucket}/runs/local"}))
    assert distributed["methods"] == local["methods"]

    record_keys = _keys(s3_bucket, "runs/ray/records/")
    assert record_keys and all(k.endswith(".parquet") for k in record_keys)
    assert "runs/ray/summary.json" in _keys(s3_bucket, "runs/ray/")
    assert any(k.endswith(".lance") or ".lance/" in k for k in _keys(s3_bucket, "lancedb/"))
    summary = json.loads(boto3.client("s3").get_object(Bucket=s3_bucket, Key="runs/ray/summary.json")["Body"].read())
    assert summary["methods"]["bm25"]["weighted"]["questions"] == 33

    written = write_report(f"s3://{s3_bucket}/runs/ray")
    assert written["table3"] == f"s3://{s3_bucket}/runs/ray/report/table3.md"
    assert "runs/ray/report/methods.png" in _keys(s3_bucket, "runs/ray/report/")
    # Credentials never reach the logs.
    import os

    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in caplog.text
