"""A run's lifecycle on bad days: torn or killed writes, validation before claiming, the lock, nothing to score."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.errors import ConfigError, InputError
from t2rag.pipeline.local import run_local
from t2rag.pipeline.lock import lock_path
from t2rag.run_folder.files import read_records
from tests.conftest import HASHING, real_table, write_layout


def _config(data, out, **fields):
    return load_config(
        None, {"data": {"source": data}, "methods": ["bm25"], "retrieval_only": True, "out": str(out), **fields}
    )


def test_a_run_killed_while_writing_its_manifest_resumes(tiny_data, tmp_path, monkeypatch):
    out = tmp_path / "run"
    replace, manifests = os.replace, []

    def killed_on_the_final_manifest(src, dst):
        if str(dst).endswith("manifest.json"):
            manifests.append(dst)
            if len(manifests) == 2:  # the first claims the folder, the second is written when the run finishes
                raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr("t2rag.storage.os.replace", killed_on_the_final_manifest)
    with pytest.raises(KeyboardInterrupt):
        run_local(_config(tiny_data, out))
    monkeypatch.undo()
    assert json.loads((out / "manifest.json").read_text())["fingerprint"]  # the claim is whole, never torn
    assert not os.path.exists(lock_path(str(out)))  # released on the way out
    result = run_local(_config(tiny_data, out))  # resumes: nothing to recompute
    assert result["methods"]["bm25"]["weighted"]["questions"] == read_records(str(out)).num_rows == 33


def test_a_torn_manifest_is_named_and_overwrite_recovers(tiny_data, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text('{"fingerprint": "ab')  # as an older, non-atomic writer could leave it
    with pytest.raises(ConfigError, match=r"manifest\.json: not readable JSON.*--overwrite"):
        run_local(_config(tiny_data, out))
    assert run_local(_config(tiny_data, out), overwrite=True)["methods"]["bm25"]["weighted"]["questions"] == 33


def test_validation_comes_before_the_folder_is_claimed(tiny_data, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="needs a generator"):
        run_local(_config(tiny_data, out, methods=["hyde"]))
    assert not out.exists()
    assert run_local(_config(tiny_data, out))["methods"]["bm25"]["weighted"]["retrieved"] == 33


def test_a_live_lock_refuses_and_a_stale_one_is_taken_over(tiny_data, tmp_path):
    out = tmp_path / "run"
    lock = lock_path(str(out))
    with open(lock, "w") as handle:  # a live process of this host holds it
        json.dump({"host": socket.gethostname(), "pid": os.getppid(), "since": "earlier"}, handle)
    with pytest.raises(ConfigError, match=f"in use by another run \\(pid {os.getppid()}"):
        run_local(_config(tiny_data, out))
    assert not (out / "manifest.json").exists()

    gone = subprocess.Popen(["true"])
    gone.wait()
    with open(lock, "w") as handle:  # its owner has exited
        json.dump({"host": socket.gethostname(), "pid": gone.pid, "since": "earlier"}, handle)
    assert run_local(_config(tiny_data, out))["methods"]["bm25"]["weighted"]["questions"] == 33
    assert not os.path.exists(lock)


def test_data_with_nothing_to_score_is_refused(tmp_path, capsys):
    table = real_table("FinQA").slice(0, 3)
    question = table.schema.get_field_index("question")
    blank = table.set_column(question, "question", pa.array([""] * 3, table.schema.field("question").type))
    data = write_layout(tmp_path / "layout", {"FinQA": blank})
    with pytest.raises(InputError, match="no question to score"):
        run_local(_config(str(data), tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    argv = ["eval", "--data", str(data), "--methods", "bm25", "--retrieval-only", "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no question to score" in err


def _missing_reranker(tiny_data, tmp_path, **fields) -> Path:
    config = tmp_path / "rerank.yaml"
    fields = {"data": {"source": tiny_data}, "methods": ["bm25", "reranker"], "retrieval_only": True,
              "out": str(tmp_path / "r"), "max_attempts": 3,
              "retrieval": {"reranker": {"model": "no-such-org/no-such-cross-encoder"}}, **fields}  # fmt: skip
    config.write_text(json.dumps(fields))
    return config


def test_a_run_needing_a_model_it_cannot_have_is_refused_before_any_work(tiny_data, tmp_path, capsys):
    started = time.monotonic()
    assert main(["eval", "--config", str(_missing_reranker(tiny_data, tmp_path))]) == 2
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("t2rag: error: this run needs models it cannot have here, so nothing")
    assert "the reranker 'no-such-org/no-such-cross-encoder' (for reranker): not a local directory" in err[0]
    assert "HF_HUB_OFFLINE is set" in err[0] and "`hf download no-such-org/no-such-cross-encoder`" in err[0]
    assert not (tmp_path / "r").exists()  # nothing written, not even bm25's records


def test_a_model_that_cannot_be_loaded_ends_the_run_at_once_with_one_line(tiny_data, tmp_path, capsys, caplog):
    """No retry or rerun mends a missing model: one attempt, one line naming the model and how to provide it (the
    load's own check, where the run's check is off because the nodes are meant to hold the model)."""
    retrieval = {"reranker": {"model": "no-such-org/no-such-cross-encoder"}, **HASHING}  # no first-stage model
    config = _missing_reranker(tiny_data, tmp_path, methods=["reranker"], check_models=False, retrieval=retrieval)
    assert main(["eval", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("t2rag: error: model 'no-such-org/no-such-cross-encoder' cannot be")
    assert "HF_HUB_OFFLINE is set" in err[0] and "hf download no-such-org/no-such-cross-encoder" in err[0]
    assert "attempt 2" not in caplog.text and "attempt 1 of 3 failed" not in caplog.text
