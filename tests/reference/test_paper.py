"""The paper's reference data, the setting check and the side-by-side comparison."""

from __future__ import annotations

import pytest
import yaml

from t2rag.config import load_config
from t2rag.errors import ConfigError
from t2rag.reference import PAPER_FILE, compare_table3, corpus_size_trend, load_paper, setting_differences

PAPERS_DATA = {
    "source": "hub:G4KMU/t2-ragbench",
    "pooled_corpus": False,
    "distractors": None,
    "subsets": {
        "FinQA": {"splits": ["dev", "test", "train"], "questions": 8281, "contexts": 2789},
        "ConvFinQA": {"splits": ["turn_0"], "questions": 3458, "contexts": 1806},
        "TAT-DQA": {"splits": ["dev", "test", "train"], "questions": 11349, "contexts": 2723},
    },
}


def test_the_packaged_reference_holds_the_papers_corpus():
    paper = load_paper()
    assert sum(c.questions for c in paper.corpus.values()) == 23088  # the release's question count
    assert sum(c.contexts for c in paper.corpus.values()) == 7318
    assert paper.setting.k == 3 and paper.setting.embedder == "intfloat/multilingual-e5-large-instruct"
    assert set(paper.setting.generators) == {"llama-3.3-70b-awq", "qwq-32b-awq"}
    assert paper.source.arxiv == "2506.12071"
    if not paper.table3.transcribed:
        assert paper.table3.values == {}  # nothing half-filled passes for the paper's numbers


def test_the_paper_config_is_the_papers_setting():
    config = load_config("configs/paper_table3.yaml")
    assert config.data.split is None and config.data.subsets == ["FinQA", "ConvFinQA", "TAT-DQA"]
    assert setting_differences(load_paper(), config.model_dump(), PAPERS_DATA) == []


def test_every_difference_is_named():
    config = load_config(None, {"retrieval": {"k": 5}, "generator": "qwen2.5-0.5b"}).model_dump()
    one_split = {**PAPERS_DATA, "subsets": {"FinQA": {"splits": ["test"], "questions": 1147, "contexts": 380}}}
    differences = setting_differences(load_paper(), config, one_split)
    assert differences == [
        "k = 5 (paper: 3)",
        "embedder all-MiniLM-L6-v2 (paper: intfloat/multilingual-e5-large-instruct)",
        "generator qwen2.5-coder-0.5b (paper: Llama 3.3 70B, QwQ 32B)",
        "FinQA: test split(s), 1,147 questions over 380 contexts (paper: all splits, 8,281 over 2,789)",
    ]
    assert "corpus unknown" in setting_differences(load_paper(), config, None)[-1]


def test_comparison_subtracts_the_papers_value_per_generator(tmp_path):
    raw = yaml.safe_load(PAPER_FILE.read_text())
    raw["table3"] = {
        "transcribed": True,
        "values": {"llama-3.3-70b-awq": {"hybrid_bm25": {"FinQA": {"mrr@3": 40.0, "number_match": 30.0}}}},
    }
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(raw))
    summaries = {
        "hybrid_bm25": {"subsets": {"FinQA": {"mrr@3": 47.5, "number_match": 25.0}}, "weighted": {"mrr@3": 47.5}},
        "bm25_meta": {"subsets": {"FinQA": {"mrr@3": 96.3}}, "weighted": {"mrr@3": 96.3}},
    }
    header, rows = compare_table3(load_paper(path), summaries)
    assert header == [
        "method", "subset", "metric", "run",
        "paper Llama 3.3 70B", "run - paper Llama 3.3 70B", "paper QwQ 32B", "run - paper QwQ 32B",
    ]  # fmt: skip
    assert rows[:3] == [
        ["Hybrid BM25", "FinQA", "number_match", 25.0, 30.0, -5.0, None, None],
        ["Hybrid BM25", "FinQA", "mrr@3", 47.5, 40.0, 7.5, None, None],
        ["Hybrid BM25", "W. Avg", "mrr@3", 47.5, None, None, None, None],
    ]
    assert rows[3][0] == "bm25_meta (not in the paper)" and rows[3][4] is None


def test_a_broken_reference_is_one_clear_error(tmp_path):
    path = tmp_path / "paper.yaml"
    path.write_text("source: {title: x}\n")
    with pytest.raises(ConfigError, match="not a readable paper reference"):
        load_paper(path)


@pytest.mark.parametrize(
    ("points", "trend"),
    [
        ([(300, 80.0), (3000, 60.0)], "falls"),
        ([(3000, 61.0), (300, 60.5)], "flat"),
        ([(10, 50.0), (99, 60.0)], "rises"),
    ],
)
def test_corpus_size_trend(points, trend):
    assert corpus_size_trend(points) == trend
