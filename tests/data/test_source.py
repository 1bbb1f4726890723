"""Data sources: spec resolution, the hub (without network), and S3 over real HTTP on loopback."""

from __future__ import annotations

import pytest

from t2rag.data import load_questions, resolve_source, subset_stats
from t2rag.data.source import BUNDLED_SAMPLE
from t2rag.errors import DataError
from tests.conftest import copy_sample, upload_dir


@pytest.mark.parametrize(
    ("spec", "kind", "location", "revision"),
    [
        (None, "bundled", str(BUNDLED_SAMPLE), None),
        ("s3://bucket/t2/", "s3", "s3://bucket/t2", None),
        ("G4KMU/t2-ragbench", "hub", "G4KMU/t2-ragbench", None),
        ("G4KMU/t2-ragbench@v1.0", "hub", "G4KMU/t2-ragbench", "v1.0"),
        ("hf://datasets/G4KMU/t2-ragbench@abc123", "hub", "G4KMU/t2-ragbench", "abc123"),
    ],
)
def test_resolve_source(spec, kind, location, revision):
    src = resolve_source(spec)
    assert (src.kind, src.location, src.revision) == (kind, location, revision)


def test_local_directory_and_its_data_folder(tmp_path):
    copy_sample(tmp_path)
    assert resolve_source(str(tmp_path)).kind == "local"
    assert len(load_questions(str(tmp_path))) == 883 + 1142
    assert len(load_questions(str(tmp_path / "data"), subsets=["FinQA"])) == 883


def test_a_root_folder_named_data_holds_the_layout(tmp_path):
    copy_sample(tmp_path / "data")  # /x/data/data/FinQA/...: the root's own name must not matter
    assert len(load_questions(str(tmp_path / "data"), subsets=["FinQA"])) == 883


def test_hub_download_requests_the_right_files(monkeypatch, tmp_path):
    copy_sample(tmp_path)
    calls = []

    def fake_snapshot_download(**kwargs):
        calls.append(kwargs)
        return str(tmp_path)

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    qs = load_questions("G4KMU/t2-ragbench@rev7", subsets=["TAT-DQA"])
    assert len(qs) == 1142
    assert calls == [
        {
            "repo_id": "G4KMU/t2-ragbench",
            "repo_type": "dataset",
            "revision": "rev7",
            "allow_patterns": ["data/TAT-DQA/**"],
        }
    ]
    assert qs.files[0].startswith("hf://datasets/G4KMU/t2-ragbench/data/TAT-DQA/dev/")


def test_hub_failure_is_one_clear_error(monkeypatch):
    import huggingface_hub

    def offline(**kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(DataError, match="could not download G4KMU/t2-ragbench@main from the hub: network"):
        load_questions("G4KMU/t2-ragbench")


@pytest.mark.slow
def test_load_from_s3(tmp_path, s3_bucket):
    copy_sample(tmp_path)
    uri = upload_dir(tmp_path, s3_bucket, "benchmarks/t2")
    qs = load_questions(uri, subsets=["FinQA", "TAT-DQA"])
    assert subset_stats(qs)["FinQA"]["contexts"] == 299 and len(qs) == 2025
    assert qs.files[0].startswith(f"s3://{s3_bucket}/benchmarks/t2/data/FinQA/")
    with pytest.raises(DataError, match=r"not found|no parquet"):
        load_questions(f"s3://{s3_bucket}/missing")
