"""A run's files are whole or absent when their writer dies mid-write: a process writing record parts, the result,
the manifest, judge verdicts and a sweep manifest in a loop is killed (SIGKILL) at random moments, on local disk and
on S3 (moto); after every kill, every file present reads whole. Each test also shows that kills landed mid-write
(the temporary files of torn local writes, the unfinished multipart uploads of torn S3 ones)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from t2rag.run_folder.files import MANIFEST_FILE, RECORDS_DIR, RESULT_FILE, VERDICTS_DIR, done_keys, parquet_files
from t2rag.storage import join, read_bytes
from t2rag.sweep.spec import SWEEP_FILE
from tests.run_folder.killed_writer import ROWS, tables, write_forever

ROOT = Path(__file__).resolve().parents[2]


def check_whole(out: str) -> int:
    """Assert every file of the run reads whole; returns the record parts."""
    for name in (RESULT_FILE, MANIFEST_FILE, SWEEP_FILE):
        data = read_bytes(join(out, name))
        if data is not None:  # absent until a first write of it completes
            document = json.loads(data)
            assert hashlib.sha256(document["text"].encode()).hexdigest() == document["digest"], name
    parts = 0
    for folder in (RECORDS_DIR, VERDICTS_DIR):
        fs, files = parquet_files(out, folder)
        for path in files:
            assert pq.read_table(path, filesystem=fs).num_rows == ROWS, path
        parts += len(files) if folder == RECORDS_DIR else 0
    return parts


def test_files_killed_mid_write_on_local_disk_are_whole_or_absent(tmp_path):
    """Forked writers (a kill every few hundred milliseconds), until 2 kills have torn a write (at most 150)."""
    out, rng, made = str(tmp_path / "run"), random.Random(1), tables()
    kills, torn = 0, set()
    while len(torn) < 2 and kills < 150:
        child = os.fork()
        if child == 0:  # pragma: no cover - the child only writes until it is killed
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
            write_forever(out, json_mb=3.0, made=made)
        time.sleep(rng.uniform(0.02, 0.3))
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        kills += 1
        torn |= {p.name for p in (tmp_path / "run").rglob("*.tmp")}
        check_whole(out)
    assert len(torn) >= 2, f"{kills} kills tore {len(torn)} writes: the test proved nothing"
    parts = check_whole(out)
    for path in (tmp_path / "run").rglob("*.tmp"):  # left a minute ago by writers that are gone
        os.utime(path, (time.time() - 60, time.time() - 60))
    assert len(done_keys(out)) == ROWS  # every part holds the same (method, id) pairs
    assert not list((tmp_path / "run" / RECORDS_DIR).glob("*.tmp"))  # a resuming run clears the torn writes
    assert len(parquet_files(out, RECORDS_DIR)[1]) == parts


@pytest.mark.usefixtures("s3_server")
def test_files_killed_mid_write_on_s3_are_whole_or_absent():
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="whole-writes")
    out, rng = "s3://whole-writes/run", random.Random(2)
    for _ in range(4):  # JSON files of 12 MB: uploaded in parts, so a kill mid-upload leaves an unfinished one
        writer = subprocess.Popen([sys.executable, "-m", "tests.run_folder.killed_writer", out, "12"], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        assert writer.stdout is not None
        writer.stdout.readline()  # one whole round first
        time.sleep(rng.uniform(0.0, 1.0))
        writer.send_signal(signal.SIGKILL)
        writer.communicate()
        check_whole(out)
    unfinished = s3.list_multipart_uploads(Bucket="whole-writes").get("Uploads", [])
    assert unfinished, "no kill landed mid-upload: the test proved nothing"
    assert len(done_keys(out)) == ROWS
