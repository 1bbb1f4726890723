"""The explorer's response times on a paper-sized run: 184,704 records (the release's 23,088 questions x the
paper's 8 methods) over release-sized stand-in data (bench/release_sized_data.py).

    python bench/explore_scale.py [--work DIR] [--requests 20]

Rankings are real (BM25 over the stand-in corpora, every question); the paper's eight method names carry them,
each with a scripted answer per record (right, a wrong number, "None" or a formula that does not evaluate, by a
hash) parsed and scored by the project's own stage, so every outcome occurs. The records are written in blocks of
2,048 rows, as a run writes them. Prints the time to index the run and, over real HTTP on loopback, the time of
each kind of request (median and slowest). The stand-in data is NOT the benchmark: never read its metrics.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import load_config
from t2rag.methods import PAPER_METHODS
from t2rag.pipeline.local import run_local
from t2rag.resources import Resources
from t2rag.results.explore.app import make_server
from t2rag.results.explore.index import load_run
from t2rag.run_folder.files import read_records, write_records
from t2rag.run_folder.records import to_records
from t2rag.stages import built
from t2rag.stages.base import run_chain

BLOCK = 2048


def scripted(question_id: str, method: str, reference: float | None) -> str:
    kind = int(hashlib.sha256(f"{method}/{question_id}".encode()).hexdigest(), 16) % 4
    if reference is None or kind == 2:
        formula, computed = "None", "N/A"
    elif kind == 0:
        formula, computed = f"add({reference!r}, 0)", repr(reference)
    elif kind == 1:
        formula, computed = f"add({reference!r}, 1)", repr(reference + 1)
    else:
        formula, computed = "divide(revenue, 2)", "N/A"
    return json.dumps(
        {"reasoning_steps": [f"step of {method}"], "final_formula": formula, "computed_formula": computed}
    )


def build_run(work: Path) -> Path:
    data, bm25_run, run = work / "data", work / "bm25", work / "run"
    if (run / "records").is_dir():
        return run
    subprocess.run([sys.executable, str(Path(__file__).parent / "release_sized_data.py"), str(data)], check=True)
    config = load_config(None, {"data": {"source": str(data)}, "methods": ["bm25"], "retrieval_only": True,
                                "out": str(bm25_run)})  # fmt: skip
    started = time.monotonic()
    run_local(config)
    print(f"bm25 over every stand-in question: {time.monotonic() - started:.0f} s")
    ranked = read_records(str(bm25_run))
    parse = built(Resources(config), ("parse_answers",))
    methods = list(PAPER_METHODS)
    started = time.monotonic()
    part = 0
    for method in methods:
        rows = ranked.set_column(ranked.schema.get_field_index("method"), "method", pa.array([method] * len(ranked)))
        if method in ("oracle", "pretrained_only"):
            empty = pa.nulls(len(rows), rows.schema.field("context_ids").type)
            rows = rows.set_column(rows.schema.get_field_index("context_ids"), "context_ids", empty)
            rows = rows.set_column(
                rows.schema.get_field_index("scores"), "scores", pa.nulls(len(rows), pa.list_(pa.float64()))
            )
            rows = rows.set_column(
                rows.schema.get_field_index("gold_rank"), "gold_rank", pa.nulls(len(rows), pa.int32())
            )
        refs = rows.column("reference").to_pylist()
        raw = [scripted(i, method, r) for i, r in zip(rows.column("id").to_pylist(), refs, strict=True)]
        rows = rows.set_column(rows.schema.get_field_index("raw_output"), "raw_output", pa.array(raw))
        for start in range(0, len(rows), BLOCK):
            block = run_chain(parse, rows.slice(start, BLOCK).drop_columns(["formula", "prediction", "number_match",
                                                                             "outcome"]))  # fmt: skip
            write_records(str(run), to_records(block), f"bench-{part:05d}")
            part += 1
    shutil.copy(bm25_run / "manifest.json", run / "manifest.json")
    print(f"{len(methods) * len(ranked):,} records in {part} files written in {time.monotonic() - started:.0f} s")
    return run


def timed(client: httpx.Client, url: str, times: dict[str, list[float]], kind: str) -> dict:
    started = time.perf_counter()
    response = client.get(url)
    times.setdefault(kind, []).append(time.perf_counter() - started)
    response.raise_for_status()
    return response.json() if "json" in response.headers.get("content-type", "") else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/t2rag-explore-scale")
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    run = build_run(Path(args.work))
    started = time.monotonic()
    index = load_run(str(run))
    print(
        f"indexed {index.records.num_rows:,} records ({len(index.files)} files) in {time.monotonic() - started:.1f} s"
    )
    server = make_server(index, "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    times: dict[str, list[float]] = {}
    outcomes = ("gold_not_read", "wrong_number", "formula_error", "no_answer", "correct")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        timed(client, "/", times, "the page")
        timed(client, "/api/overview", times, "the tables (overview)")
        ids = []
        for n in range(args.requests):
            method = PAPER_METHODS[n % len(PAPER_METHODS)]
            page = timed(client, f"/api/questions?method={method}&outcome={outcomes[n % 5]}&offset={n * 50}", times,
                         "questions filtered by method and outcome")  # fmt: skip
            ids += [(r["subset"], r["id"]) for r in page["rows"][:1]]
            timed(client, f"/api/questions?q=revenue&offset={n * 50}", times, "questions by a word of their text")
        for subset, qid in ids[: args.requests]:
            detail = timed(client, f"/api/question/{subset}/{qid}", times, "one question, every method side by side")
            ranked = next((a["contexts"] for a in detail["answers"] if a["contexts"]), None)
            if ranked:
                timed(client, f"/api/context/{ranked[0]['context_id']}", times, "a context's text")
    server.should_exit = True
    print("\n| request | n | median ms | slowest ms |\n|---|---:|---:|---:|")
    for kind, values in times.items():
        print(f"| {kind} | {len(values)} | {1000 * statistics.median(values):.0f} | {1000 * max(values):.0f} |")
    records = index.records
    counts = {d["values"]: d["counts"] for d in pc.value_counts(records.column("outcome")).to_pylist()}
    print(f"\n(outcomes over the records: {counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
