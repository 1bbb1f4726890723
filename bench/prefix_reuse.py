"""Prefix reuse on and off, side by side: the oracle over every question of the first N FinQA dev contexts that
have two or more questions (sorted by context_id), on the single-process runner, each run with a fresh generation
cache. Prints each run's wall time, prompt tokens, the share of them the engine reused, and how many predictions
agree.

    .venv/bin/python bench/prefix_reuse.py [--contexts 10] [--generator qwen2.5-0.5b] [--json]

The generator is the main job's Qwen2.5-Coder-0.5B by default (SmolLM2 writes to its 512-token limit on these
prompts, so its decoding hides the prefill).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SAMPLE = Path(__file__).resolve().parents[1] / "t2rag/sample/data/FinQA/dev/dev-00000-of-00001.parquet"


def shared_context_layout(root: Path, contexts: int = 10) -> Path:
    """The hub layout under `root` with the FinQA dev rows of the first `contexts` contexts (by context_id) that
    have two or more questions."""
    table = pq.read_table(SAMPLE)
    counts = table.group_by("context_id").aggregate([("context_id", "count")])
    shared = sorted(counts.filter(pc.greater_equal(counts.column("context_id_count"), 2)).column(0).to_pylist())
    rows = table.filter(pc.is_in(table.column("context_id"), pa.array(shared[:contexts])))
    folder = root / "data" / "FinQA" / "dev"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, folder / "dev-00000-of-00001.parquet")
    return root


def run(data: Path, out: Path, generator: str | dict, reuse: bool, prompts: dict | None = None) -> dict:
    """One oracle run with a fresh generation cache (and `prompts` settings, if given): its wall time, token
    counts and predictions."""
    from t2rag.config import load_config
    from t2rag.pipeline.local import run_local
    from t2rag.run_folder.files import read_records

    spec = generator if isinstance(generator, dict) else {"preset": generator}
    config = load_config(
        None,
        {
            "data": {"source": str(data)},
            "methods": ["oracle"],
            "generator": {**spec, "prefix_reuse": reuse},
            "prompts": prompts or {},
            "out": str(out),
        },
    )
    with tempfile.TemporaryDirectory() as cache:
        os.environ["T2RAG_CACHE"] = cache
        started = time.perf_counter()
        run_local(config)
        wall = time.perf_counter() - started
    records = read_records(str(out)).sort_by("id")
    prompt = int(pc.sum(records.column("prompt_tokens")).as_py())
    cached = int(pc.sum(records.column("cached_prompt_tokens")).as_py())
    return {
        "prefix_reuse": reuse,
        "questions": records.num_rows,
        "wall_s": round(wall, 1),
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "cached_share": round(cached / prompt, 4) if prompt else None,
        "predictions": records.column("prediction").to_pylist(),
        "number_match": int(pc.sum(records.column("number_match").cast(pa.int64())).as_py() or 0),
    }


def agreement(a: list, b: list) -> float:
    """Share of positions where two prediction lists agree (both None counts as agreeing)."""
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a) if a else 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contexts", type=int, default=10)
    parser.add_argument("--generator", default="qwen2.5-0.5b", help="a generator preset")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        root = shared_context_layout(Path(tmp) / "data", args.contexts)
        off = run(root, Path(tmp) / "off", args.generator, reuse=False)
        on = run(root, Path(tmp) / "on", args.generator, reuse=True)
    result = {
        "contexts": args.contexts,
        "generator": args.generator,
        "runs": [{k: v for k, v in r.items() if k != "predictions"} for r in (off, on)],
        "wall_ratio_on_off": round(on["wall_s"] / off["wall_s"], 3),
        "prediction_agreement": round(agreement(off["predictions"], on["predictions"]), 4),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"oracle over {on['questions']} questions of {args.contexts} shared FinQA dev contexts, {args.generator}")
    for r in result["runs"]:
        print(f"- prefix_reuse {str(r['prefix_reuse']).lower():5}: {r['wall_s']:7.1f} s, {r['prompt_tokens']:,} prompt "
              f"tokens, {r['cached_prompt_tokens']:,} reused ({100 * r['cached_share']:.1f}%), Number Match "
              f"{r['number_match']}/{r['questions']}")  # fmt: skip
    print(f"wall time on/off: {result['wall_ratio_on_off']:.3f}; predictions agreeing: "
          f"{100 * result['prediction_agreement']:.1f}%")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
