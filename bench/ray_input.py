"""How many worker processes a Ray run starts, and its time, with the job's input read two ways: through
`ray_jobs.table_blocks` (the product) and through `ray.data.from_arrow` (before), each on a fresh local cluster.

Usage: python bench/ray_input.py [--contexts 25] [--block-rows 8] [--shards 3] [--rounds 2]
The questions of the first N contexts per subset of the bundled sample, bm25 and base, retrieval only, the corpus in
shards (one retrieval actor each), as in the sharded Ray test. Every process whose command line is a Ray worker's is
counted while the run lasts (sampled every 0.2 s), actors and Ray Data's own actors included. The two paths
alternate for `--rounds` rounds, so neither always runs first.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def mini_layout(root: Path, contexts: int) -> str:
    """A hub-layout copy of the bundled sample holding the questions of its first `contexts` contexts per subset."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from t2rag.data.source import BUNDLED_SAMPLE

    for path in sorted((BUNDLED_SAMPLE / "data").glob("*/*/*.parquet")):
        table = pq.read_table(path)
        keep = list(dict.fromkeys(table.column("context_id").to_pylist()))[:contexts]
        out = root / path.relative_to(BUNDLED_SAMPLE)
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.filter(pc.is_in(table.column("context_id"), pa.array(keep))), out)
    return str(root / "data")


def from_arrow_blocks(table, block_rows: int):
    """The input path before `table_blocks`: one `from_arrow` block per `block_rows` rows."""
    import ray

    return ray.data.from_arrow([table.slice(i, block_rows) for i in range(0, table.num_rows, block_rows)])


class WorkerCount:
    """The Ray worker processes seen while it runs (sampled)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            for proc in psutil.process_iter(["pid", "cmdline"]):
                cmdline = " ".join(proc.info["cmdline"] or [])
                worker = "default_worker.py" in cmdline or cmdline.startswith("ray::")
                if worker and "Agent" not in cmdline:  # the node's dashboard and runtime-env agents are no workers
                    self.seen.add(proc.info["pid"])
            time.sleep(0.2)

    def __enter__(self) -> WorkerCount:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contexts", type=int, default=25)
    parser.add_argument("--block-rows", type=int, default=8)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    import ray

    import ray_jobs.evaluate as evaluate
    from ray_jobs.local_cluster import local_cpus, start_local_cluster, stop_local_cluster
    from t2rag.config import load_config
    from t2rag.pipeline.local import LocalRunner

    work = Path(tempfile.mkdtemp())
    fields = {
        "data": {"source": mini_layout(work / "data", args.contexts)},
        "methods": ["bm25", "base"],
        "retrieval_only": True,
        "ray": {"retrieve_block_rows": args.block_rows},
    }
    LocalRunner(load_config(None, {**fields, "out": str(work / "warm")})).run()  # builds the indexes, untimed
    product = evaluate.dataset_from_table
    paths = (("table_blocks", product), ("from_arrow", from_arrow_blocks))
    for round_, (name, reader) in enumerate(paths[i % 2 - j] for i in range(args.rounds) for j in range(2)):
        evaluate.dataset_from_table = reader
        start_local_cluster(num_cpus=local_cpus(), object_store_memory=300 * 2**20)
        ray.data.DataContext.get_current().enable_progress_bars = False
        ray_fields = {"runner": "ray", "out": str(work / f"{name}-{round_}"), "retrieval": {"shards": args.shards}}
        config = load_config(None, {**fields, **ray_fields})
        try:
            with WorkerCount() as workers:
                started = time.perf_counter()
                summary = evaluate.run_ray(config)
                wall = time.perf_counter() - started
        finally:
            stop_local_cluster()
        rows = sum(s["weighted"]["questions"] for s in summary["methods"].values())
        print(f"{name:13s}: {wall:6.1f} s, {len(workers.seen):3d} worker processes, {rows} records")
    evaluate.dataset_from_table = product


if __name__ == "__main__":
    main()
