"""A writer of a run's files that runs until it is killed (tests/run_folder/test_whole_writes.py).

    python -m tests.run_folder.killed_writer OUT          (or `write_forever(OUT)` in a forked child)

Every round writes, through the product's own functions, a record part, the result, the manifest, a block of judge
verdicts and a sweep manifest. The payloads are made once, so a round is mostly writing and a kill at a random
moment often lands mid-write; each JSON file carries its round and a digest of its text, so a reader can tell a
whole file from a torn one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import pyarrow as pa

from t2rag.judge.run import VERDICT_SCHEMA, write_verdicts
from t2rag.run_folder.files import new_part_name, write_manifest, write_records, write_result
from t2rag.run_folder.records import RECORD_SCHEMA
from t2rag.storage import join, write_bytes
from t2rag.sweep.spec import SWEEP_FILE

ROWS = 4000


def tables() -> tuple[pa.Table, pa.Table]:
    rows = [{"id": f"q{i}", "subset": "FinQA", "method": "bm25", "raw_output": os.urandom(400).hex()}
            for i in range(ROWS)]  # fmt: skip
    verdicts = [{**r, "baseline": "oracle", "judge": "j", "order": "ab"} for r in rows]
    return pa.Table.from_pylist(rows, schema=RECORD_SCHEMA), pa.Table.from_pylist(verdicts, schema=VERDICT_SCHEMA)


def write_forever(out: str, json_mb: float = 3.0, made: tuple[pa.Table, pa.Table] | None = None) -> None:
    """Write rounds until killed; `made`: the tables, made beforehand (a forked child starts writing at once)."""
    records, verdicts = made or tables()
    text = os.urandom(int(json_mb * 500_000)).hex()
    digest = hashlib.sha256(text.encode()).hexdigest()
    round_ = 0
    while True:
        round_ += 1
        document = {"round": round_, "text": text, "digest": digest}
        write_records(out, records, new_part_name(f"round{round_:04d}"))
        write_result(out, document)
        write_manifest(out, document)
        write_verdicts(out, verdicts)
        write_bytes(join(out, SWEEP_FILE), json.dumps(document).encode())
        print(round_, flush=True)


if __name__ == "__main__":
    write_forever(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 3.0)
