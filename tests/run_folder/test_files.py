"""A run's folder: its files named in one place, read and written through it."""

from __future__ import annotations

import json

from t2rag.run_folder.files import (
    EARLIER_RESULT_FILE,
    MANIFEST_FILE,
    RESULT_FILE,
    read_manifest,
    read_result,
    report_dir,
    write_manifest,
    write_result,
)


def test_the_result_is_read_before_an_older_runs_summary(tmp_path):
    (tmp_path / EARLIER_RESULT_FILE).write_text(json.dumps({"from": "summary"}))
    assert read_result(str(tmp_path)) == {"from": "summary"}  # a run made before the rename
    write_result(str(tmp_path), {"from": "result"})
    assert (tmp_path / RESULT_FILE).exists()
    assert read_result(str(tmp_path)) == {"from": "result"}


def test_the_manifest_and_report_live_where_the_folder_says(tmp_path):
    assert read_manifest(str(tmp_path)) is None
    write_manifest(str(tmp_path), {"fingerprint": "f"})
    assert json.loads((tmp_path / MANIFEST_FILE).read_text()) == {"fingerprint": "f"}
    assert read_manifest(str(tmp_path)) == {"fingerprint": "f"}
    assert report_dir(str(tmp_path)) == str(tmp_path / "report")
