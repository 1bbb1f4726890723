"""Digests of run folders, for showing that a change left what runs compute untouched.

    python bench/run_digest.py RUN_DIR [RUN_DIR ...]

For each run folder: the sha256 of its records (every column but `generation_s`, rows sorted by (method, id), as one
Arrow IPC stream) and of its result.json (keys sorted, without the fields that are wall-clock times: names ending in
`_s`, `seconds`, `started`, `finished`, `rate`, `per_s`; without its `out`; the bundled sample's source without the
checkout's path). Two runs of one config on one machine, each with an empty T2RAG_CACHE, give equal digests; a
change that alters a record or a figure changes them.
"""

from __future__ import annotations

import hashlib
import json
import sys

import pyarrow as pa

from t2rag.run_folder.files import read_records

TIMED = ("_s", "seconds", "started", "finished", "rate", "per_s", "elapsed")


def records_digest(run: str) -> tuple[str, int]:
    records = read_records(run)
    records = records.drop_columns([c for c in records.column_names if c == "generation_s"])
    records = records.sort_by([("method", "ascending"), ("id", "ascending")])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, records.schema) as writer:
        writer.write_table(records, max_chunksize=1 << 30)
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest(), records.num_rows


def untimed(value):
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith(TIMED)}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def result_digest(run: str) -> str:
    with open(f"{run}/result.json") as f:
        result = untimed(json.load(f))
    result.pop("out")  # where the run was written, not what it computed
    source = result["data"]["source"]
    if source.startswith("bundled:"):  # the bundled sample, wherever the checkout lies
        result["data"]["source"] = "bundled"
    return hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()


def main(runs: list[str]) -> int:
    for run in runs:
        records, rows = records_digest(run)
        print(f"{run}: records {records[:16]} ({rows} rows), result {result_digest(run)[:16]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
