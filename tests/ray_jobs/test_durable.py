"""Inside a Ray job, nothing a run writes may live in the job's temporary working directory."""

from __future__ import annotations

import json

import pytest

from ray_jobs.durable import JOB_CONFIG_ENV, STORAGE_ENV, durable, resolve_storage, vanishing
from t2rag.config import load_config
from t2rag.errors import ConfigError


def _config(out: str, index_uri: str | None = None):
    return load_config(None, {"out": out, "retrieval": {"index_uri": index_uri}})


@pytest.fixture
def job(monkeypatch, tmp_path):
    """This process as the driver of a job submitted with a working_dir, running in its copy (tmp_path)."""
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_x.zip"}}))
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_outside_a_job_paths_are_left_alone(monkeypatch):
    monkeypatch.delenv(JOB_CONFIG_ENV, raising=False)
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    assert durable(_config("runs/x")).out == "runs/x"


def test_a_relative_out_in_a_job_is_refused_naming_the_durable_choices(job):
    with pytest.raises(ConfigError) as refused:
        durable(_config("runs/retrieval"))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("out 'runs/retrieval' would be written inside")
    assert "s3://" in message and "storage every node shares" in message and STORAGE_ENV in message


def test_every_place_a_run_writes_is_checked(job, monkeypatch):
    monkeypatch.setenv("T2RAG_CACHE", "cache")
    with pytest.raises(ConfigError, match=r"^out '.*', retrieval.index_uri 'idx', T2RAG_CACHE 'cache' would"):
        durable(_config(str(job / "runs"), "idx"))  # an absolute path inside the working directory too


def test_durable_places_pass(job, tmp_path_factory):
    shared = tmp_path_factory.mktemp("shared")
    config = durable(_config(str(shared / "runs"), "s3://bucket/lancedb"))
    assert config.out == str(shared / "runs") and config.retrieval.index_uri == "s3://bucket/lancedb"
    assert not vanishing("s3://bucket/runs") and vanishing("runs") and vanishing(str(job / "a"))


def test_storage_root_resolves_relative_paths(job, monkeypatch):
    monkeypatch.setenv(STORAGE_ENV, "s3://bucket/t2rag")
    config = durable(_config("runs/retrieval", "lancedb"))
    assert config.out == "s3://bucket/t2rag/runs/retrieval"
    assert config.retrieval.index_uri == "s3://bucket/t2rag/lancedb"
    assert resolve_storage(_config("s3://other/runs")).out == "s3://other/runs"
    monkeypatch.setenv(STORAGE_ENV, "relative/root")
    with pytest.raises(ConfigError, match="an s3:// prefix or an absolute path"):
        durable(_config("runs/x"))


def test_a_path_that_resolves_into_the_working_directory_is_refused(job):
    # Absolute and, as written, beside the job's working directory, but `..` leads back into it.
    roundabout = f"{job.parent}/elsewhere/../{job.name}/runs"
    assert vanishing(roundabout)
    with pytest.raises(ConfigError, match="would be written inside"):
        durable(_config(roundabout))


def test_without_a_working_directory_a_path_under_the_current_one_is_durable(monkeypatch, tmp_path):
    # A job submitted without --working-dir runs where it was started (shared storage, say): nothing vanishes.
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"runtime_env": {}}))
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert not vanishing(str(tmp_path / "runs"))
    assert durable(_config(str(tmp_path / "runs"))).out == str(tmp_path / "runs")
    assert vanishing("runs")  # a relative path is still refused: where it lands depends on the node
