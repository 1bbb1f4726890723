"""`t2rag fit-fusion` fits on dev only and writes a config; configs/best_retrieval.yaml runs on another data path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.retrieval.fusion.fit import FitResult, SubsetParts, best_fit, fit_weights, held_out, score_weights
from t2rag.retrieval.fusion.weighted import FITTED_WEIGHTS, FusionWeights
from tests.conftest import copy_sample

BEST = Path(__file__).parents[3] / "configs" / "best_retrieval.yaml"


def test_fit_on_dev_writes_a_config_that_beats_plain_bm25(tmp_path, capsys) -> None:
    written = tmp_path / "fitted.yaml"
    argv = ["fit-fusion", "--subsets", "FinQA", "--methods", "bm25_meta", "--write", str(written), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    (fit,) = out["fits"]
    assert fit["method"] == "bm25_meta" and fit["questions"] == 883
    assert fit["weights"]["company"] > 0 and fit["weights"]["lexical"] == 1.0
    assert fit["mrr_at_3"] > 76.82 + 10  # plain BM25 on FinQA dev: 76.82
    assert fit["held_out_mrr_at_3"] > 76.82 + 10  # weights fitted on the other half of the questions
    config = load_config(written)
    assert config.methods == ["bm25_meta"] and config.retrieval_only and config.retrieval.k == 3
    assert config.retrieval.fusion.weights_of("bm25_meta").model_dump() == fit["weights"]
    header = written.read_text().splitlines()
    assert "split dev" in header[1] and "# Best within 3x BM25 cost per question: bm25_meta" in header


def test_fit_refuses_a_test_split(capsys) -> None:
    assert main(["fit-fusion", "--split", "test", "--methods", "bm25_meta"]) == 2
    assert "never tune on a test split" in capsys.readouterr().err


def test_the_shipped_weights_are_the_shipped_configs() -> None:
    """The defaults in code and configs/best_retrieval.yaml come from the same fit."""
    config = load_config(BEST)
    for name, weights in FITTED_WEIGHTS.items():
        assert config.retrieval.fusion.weights_of(name) == weights


@pytest.mark.slow
def test_best_retrieval_config_runs_on_a_dataset_path(tmp_path, capsys) -> None:
    data = copy_sample(tmp_path / "hub")
    out = tmp_path / "run"
    argv = ["eval", "--config", str(BEST), "--data", str(data), "--subsets", "FinQA", "--out", str(out), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    (method,) = result["methods"]
    fin = result["methods"][method]["subsets"]["FinQA"]
    assert fin["questions"] == 883 and "number_match" not in fin
    assert fin["mrr@3"] > 76.82 + 15 and fin["recall@5"] > 95


def _parts(ranks: list[int], docs: int = 8):
    """One subset whose single component `lexical` ranks each question's gold (document 0) at the given rank."""
    scores = np.tile(np.arange(docs, 0, -1, dtype=np.float64), (len(ranks), 1))  # document d ranked d + 1
    for row, rank in enumerate(ranks):
        scores[row, [0, rank - 1]] = scores[row, [rank - 1, 0]]
    n = len(ranks)
    return SubsetParts({"lexical": scores}, np.zeros(n, int), np.arange(n) % 2, [f"q{i}" for i in range(n)])


def test_scores_of_known_ranks() -> None:
    scores = score_weights([_parts([1, 2, 4, 6])], {"lexical": 1.0}, None)
    assert (scores.mrr_at_3, scores.recall_at_1, scores.recall_at_5, scores.questions) == (37.5, 25.0, 75.0, 4)
    assert score_weights([_parts([1, 2, 4, 6])], {"lexical": 1.0}, 1).recall_at_5 == 50.0  # ranks 2 and 6


def test_held_out_scores_each_half_with_the_other_halfs_weights() -> None:
    # The gold (document 0) is marked by component `a` in fold 0 and by `b` in fold 1, and each fold's other
    # component marks a wrong document: weights fitted on one half rank the other half's gold last.
    n, docs = 20, 4
    fold = np.arange(n) % 2
    a, b = np.zeros((n, docs)), np.zeros((n, docs))
    a[fold == 0, 0], b[fold == 0, 1] = 1.0, 1.0
    b[fold == 1, 0], a[fold == 1, 1] = 1.0, 1.0
    parts = [SubsetParts({"a": a, "b": b}, np.zeros(n, int), fold, [f"q{i}" for i in range(n)])]
    assert fit_weights(parts, ("a", "b"), 0)["a"] > fit_weights(parts, ("a", "b"), 0)["b"]
    unseen = held_out(parts, ("a", "b"))
    assert unseen.questions == n and unseen.recall_at_1 == 0.0


def test_the_best_fit_stays_within_the_cost_budget() -> None:
    def fit(method: str, mrr: float, cost: float) -> FitResult:
        return FitResult(method, FusionWeights(), 10, mrr, 0.0, 0.0, mrr, 0.0, cost)

    fits = [fit("cheap", 90.0, 1.5), fit("dear", 97.0, 3.5), fit("middle", 95.0, 2.5)]
    assert best_fit(fits, 3.0).method == "middle"
    assert best_fit(fits, None).method == "dear"
    assert best_fit(fits, 1.0).method == "dear"  # none within the budget: the best of all


def test_the_held_out_halves_split_by_report() -> None:
    """Every page of one report (company and report year) falls in the same half, on real dev contexts, and both
    halves hold many reports; a context whose metadata names no report is its own."""
    from collections import defaultdict

    from t2rag.data import build_corpora, load_questions
    from t2rag.data.corpus import Corpus
    from t2rag.retrieval.fusion.fit import report_folds

    for corpus in build_corpora(load_questions(None)).values():
        folds = report_folds(corpus, np.arange(len(corpus)))
        sides: dict[tuple, set[int]] = defaultdict(set)
        pages: dict[tuple, int] = defaultdict(int)
        for i, fold in enumerate(folds.tolist()):
            report = (corpus.metadata["company_name"][i], corpus.metadata["report_year"][i])
            sides[report].add(fold)
            pages[report] += 1
        assert all(len(s) == 1 for s in sides.values())
        several = [r for r, n in pages.items() if n > 1]  # reports with more than one page: the case split here
        assert several and 0.3 < folds.mean() < 0.7
    bare = Corpus("bare", ("a", "b"), ("x", "x"), ("t", "u"))
    assert report_folds(bare, np.arange(2)).tolist() == [hashlib.sha256(c.encode()).digest()[0] % 2 for c in "ab"]
