"""The corpus-size ablation on real data, fanned out as Ray tasks (the embedder ablation is a sweep:
tests/ray_jobs/test_sweep.py)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from ray_jobs.ablate_corpus_size import ablate_corpus_size, run_cells, sample_corpus_positions
from t2rag.config import load_config
from t2rag.pipeline.local import run_local
from t2rag.resources import Resources
from t2rag.results.report import write_report
from tests.conftest import HASHING

pytestmark = pytest.mark.slow


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_corpus_size_ablation(ray_local, mini_data, tmp_path):
    fields = {"data": {"source": mini_data}, "methods": ["bm25", "base"], "retrieval": HASHING, "out": str(tmp_path)}
    config = load_config(None, fields)
    paths = ablate_corpus_size(config, fractions=(0.4, 1.0), seeds=2)
    cells = _rows(paths["cells"])
    assert len(cells) == 2 * 2 * 2 * 2  # subsets x fractions x seeds x methods
    table = _rows(paths["table"])
    assert {(r["subset"], r["method"], r["size"]) for r in table} >= {
        ("FinQA", "bm25", "10"),
        ("TAT-DQA", "base", "25"),
    }
    full = {(r["subset"], r["method"]): r for r in table if r["size"] == "25"}
    # The whole corpus is the same for every seed: no spread, and the value equals the plain evaluation.
    reference = run_local(config.model_copy(update={"retrieval_only": True, "out": str(tmp_path / "plain")}))
    for (subset, method), row in full.items():
        assert float(row["mrr3_std"]) == 0.0
        assert float(row["mrr3_mean"]) == pytest.approx(
            reference["methods"][method]["subsets"][subset]["mrr@3"], abs=1e-3
        )
    small = [r for r in table if r["size"] == "10"]
    assert small and all(float(r["documents"]) == 10 for r in small)  # 40% of 25 contexts
    assert (tmp_path / "ablations" / "corpus_size.png").stat().st_size > 10_000
    report = write_report(str(tmp_path / "plain"), str(tmp_path / "report"))
    assert "table3" in report


def test_upward_ablation_with_synthetic_distractors_resumes(ray_local, mini_data, tmp_path):
    """Sizes below, at and above each subset's 25 contexts; above it every question is asked against its own
    contexts plus synthetic distractors (labelled, and kept out of the quality table). A rerun computes nothing."""
    fields = {"data": {"source": mini_data}, "methods": ["bm25", "base"], "retrieval": HASHING, "out": str(tmp_path)}
    config = load_config(None, fields)
    sizes = (10, 25, 60, 400)
    paths = ablate_corpus_size(config, seeds=2, sizes=sizes, distractors="synthetic")
    assert paths["cells"].endswith("corpus_size_synthetic_cells.csv")
    cells = _rows(paths["cells"])
    assert len(cells) == 2 * len(sizes) * 2 * 2 and all(c["synthetic"] == "True" for c in cells)
    assert {int(c["documents"]) for c in cells} == set(sizes)
    asked = {c["subset"]: int(c["questions"]) for c in cells if c["size"] == "25"}
    assert all(int(c["questions"]) == asked[c["subset"]] for c in cells if int(c["size"]) >= 25)
    assert all(int(c["distractors"]) == max(0, int(c["size"]) - 25) for c in cells)
    # Dense scores of the documents already there do not change as a seed's corpus grows (BM25's statistics do),
    # so added documents can only push a gold context down.
    dense = {(c["subset"], c["size"], c["seed"]): float(c["mrr@3"]) for c in cells if c["method"] == "base"}
    for subset in asked:
        for seed in ("0", "1"):
            assert dense[(subset, "400", seed)] <= dense[(subset, "60", seed)] <= dense[(subset, "25", seed)]
    assert not (tmp_path / "ablations" / "corpus_size.csv").exists()  # nothing synthetic in the quality table
    table = _rows(paths["table"])
    assert {"index_s", "queries_per_s", "task_peak_rss_mb"} <= set(table[0])
    before = (tmp_path / "ablations" / "corpus_size_synthetic_cells.csv").read_text()
    ablate_corpus_size(config, seeds=2, sizes=sizes, distractors="synthetic")
    assert (tmp_path / "ablations" / "corpus_size_synthetic_cells.csv").read_text() == before


def test_cells_list_each_question_s_gold_and_rank(mini_data):
    """In one process, no cluster: with `per_question`, a cell lists every question it asked (its gold context, in
    the cell's corpus) and the gold's rank, and its metrics are those ranks' (what bench/retrieval_growth.py
    resamples)."""
    config = load_config(None, {"data": {"source": mini_data}, "methods": ["bm25"], "retrieval_only": True})
    contexts = set(Resources(config).corpus("FinQA").context_ids)
    args = (config.model_dump_json(), "FinQA", [10, 25], 0, ["bm25"], np.zeros((25, 0), np.float32), None, None, None)
    plain, listed = run_cells(*args), run_cells(*args, per_question=True)
    assert "ranks" not in plain[0]
    for cell, row in zip(plain, listed, strict=True):
        ranks = np.asarray(row["ranks"])
        assert len(row["gold"]) == len(ranks) == row["questions"] == cell["questions"]
        assert set(row["gold"]) <= contexts and len(set(row["gold"])) <= row["size"]
        assert row["recall@1"] == cell["recall@1"] == pytest.approx(100 * np.mean(ranks == 1), abs=1e-4)
        assert row["mrr@3"] == pytest.approx(100 * np.mean(np.where(ranks > 0, 1 / np.maximum(ranks, 1), 0)), abs=1e-4)
    assert listed[1]["questions"] > listed[0]["questions"]  # every question is asked of the whole corpus


def test_sampling_is_seeded():
    a = sample_corpus_positions(100, 0.3, seed=1)
    assert len(a) == 30 and (a == sample_corpus_positions(100, 0.3, seed=1)).all()
    assert not (a == sample_corpus_positions(100, 0.3, seed=2)).all()


def test_a_sharded_cell_scores_as_the_whole_corpus(ray_local, mini_data, tmp_path):
    """A synthetic cell above `shard_docs` is searched in shards, each made and indexed in a task of its own with
    the corpus's statistics: the same MRR@3 and Recall@1 as the cell searched whole, every question certified."""
    methods = ["bm25", "bm25_focus"]
    cells = {}
    for shard_docs in (200, 1000):
        config = load_config(None, {"data": {"source": mini_data}, "out": str(tmp_path / str(shard_docs))})
        sizes = (60, 400)
        paths = ablate_corpus_size(
            config, seeds=1, methods=methods, sizes=sizes, distractors="synthetic", shard_docs=shard_docs
        )
        cells[shard_docs] = {(c["subset"], c["method"], c["size"]): c for c in _rows(paths["cells"])}
    assert cells[200].keys() == cells[1000].keys() and len(cells[200]) == 2 * 2 * 2
    for key, whole in cells[1000].items():
        sharded = cells[200][key]
        assert (sharded["mrr@3"], sharded["recall@1"]) == (whole["mrr@3"], whole["recall@1"])
        if key[2] == "400":
            assert (sharded["shards"], sharded["uncertified"]) == ("2", "0")
            assert float(sharded["task_peak_rss_mb"]) > 0
