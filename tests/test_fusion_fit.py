"""`t2rag fit-fusion` fits on dev only and writes a config; configs/best_retrieval.yaml runs on another data path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.retrieval.fused import FITTED_WEIGHTS
from tests.conftest import copy_sample

BEST = Path(__file__).parents[1] / "configs" / "best_retrieval.yaml"


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
