"""Generation by shared prefix on the single-process runner, with SmolLM2: the order and the reuse it buys, counted
by the engine, with the same records as a run in plan order; identical prompts generated once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bench.prefix_reuse import agreement, run, shared_context_layout
from t2rag.config import load_config
from t2rag.pipeline.local import run_local
from t2rag.results.report import generation_table
from t2rag.run_folder.files import read_records

pytestmark = [pytest.mark.llm, pytest.mark.slow]

#: Short answers: the prompts' prefill is what is measured here.
SMOLLM2 = {"preset": "smollm2-135m", "n_threads": 2, "sampling": {"max_tokens": 12}}
CLIPPED = {"max_context_chars": 1500}


def _interleaved(root: Path) -> Path:
    """The layout with its questions alternating between their contexts, as the real data scatters them (plan order
    follows the data)."""
    path = next(root.rglob("*.parquet"))
    table = pq.read_table(path)
    contexts, seen, rank = table.column("context_id").to_pylist(), Counter(), []
    for context in contexts:
        rank.append(seen[context])
        seen[context] += 1
    pq.write_table(table.take(pa.array(sorted(range(len(rank)), key=lambda i: (rank[i], contexts[i])))), path)
    return root


@pytest.fixture(scope="module")
def runs(smollm2_path, short_system_prompt, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("prefix")
    data = _interleaved(shared_context_layout(root / "data", contexts=2))
    # Contexts clipped to 1,500 characters and the short system prompt: less prefill, and what a question
    # shares with the one before it is its context, not the system prompt.
    prompts = {**CLIPPED, "answer_system": short_system_prompt}
    return {reuse: run(data, root / f"out-{reuse}", SMOLLM2, reuse, prompts) for reuse in (False, True)}


def test_prompts_sharing_a_context_reuse_it_and_the_answers_stay(runs) -> None:
    off, on = runs[False], runs[True]
    assert on["questions"] == off["questions"] >= 4  # every question of two contexts with two or more
    assert on["prompt_tokens"] == off["prompt_tokens"]  # the same prompts, in another order
    assert on["cached_share"] >= 0.6
    assert off["cached_share"] < on["cached_share"] - 0.2  # plan order reuses the system prompt only
    assert agreement(off["predictions"], on["predictions"]) >= 0.9


def test_identical_prompts_are_generated_once_and_reported_as_reused(
    smollm2_path, short_system_prompt, tmp_path, monkeypatch
) -> None:
    """bm25 reading its top 1 sends the oracle's very prompt wherever it ranks the gold context first."""
    monkeypatch.setenv("T2RAG_CACHE", str(tmp_path / "cache"))
    data = shared_context_layout(tmp_path / "data", contexts=2)
    config = load_config(
        None,
        {
            "data": {"source": str(data)},
            "methods": ["oracle", "bm25"],
            "retrieval": {"k": 1},
            "prompts": {"max_context_chars": 1000, "answer_system": short_system_prompt},
            "generator": SMOLLM2,
            "out": str(tmp_path / "out"),
        },
    )
    result = run_local(config)
    records = read_records(str(tmp_path / "out")).sort_by([("id", "ascending"), ("method", "ascending")])
    by_key = {(r["method"], r["id"]): r for r in records.to_pylist()}
    hits = [r for r in by_key.values() if r["method"] == "bm25" and r["gold_rank"] == 1]
    assert hits, "bm25 ranks some gold context first"
    for hit in hits:
        twin = by_key[("oracle", hit["id"])]
        assert hit["prompt_hash"] == twin["prompt_hash"]
        assert hit["raw_output"] == twin["raw_output"]
        repeat = min([hit, twin], key=lambda r: r["generation_s"])
        assert repeat["generation_s"] == 0.0 and repeat["cached_prompt_tokens"] == repeat["prompt_tokens"]
    cached = pc.sum(records.column("cached_prompt_tokens")).as_py()
    usage = result["generation"]["oracle"]["all"]
    assert usage["prompt_tokens"] > usage["cached_prompt_tokens"] > 0
    assert sum(m["all"]["cached_prompt_tokens"] for m in result["generation"].values()) == cached
    header, rows = generation_table(records)
    assert header[:2] == ["method", "subset"] and header[-3:] == ["prompt tokens", "cached prompt tokens", "cached %"]
    oracle = next(r for r in rows if r[0] == "oracle")
    assert oracle[1] == "FinQA" and oracle[-3:] == list(usage.values())
