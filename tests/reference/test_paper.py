"""The paper's reference data, the setting check and the side-by-side comparison."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2rag.config import load_config
from t2rag.errors import ConfigError
from t2rag.reference import compare_table4, compare_with_paper, corpus_size_trend, load_paper, setting_differences

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
    assert sum(c.questions for c in paper.table2.values()) == 32908  # the paper's, VQAonBD included
    assert paper.table2["VQAonBD"].questions == 9820 and "VQAonBD" not in paper.released
    assert paper.setting.k == 3 and paper.setting.embedder == "intfloat/multilingual-e5-large-instruct"
    assert set(paper.setting.generators) == {"llama-3.3-70b-awq", "qwq-32b-awq"}
    assert paper.source.arxiv == "2506.12071"


@pytest.mark.parametrize(
    ("generator", "method", "subset", "metric", "printed"),
    [
        ("llama-3.3-70b-awq", "hybrid_bm25", "FinQA", "number_match", 41.7),
        ("llama-3.3-70b-awq", "hybrid_bm25", "FinQA", "mrr@3", 40.0),
        ("llama-3.3-70b-awq", "pretrained_only", "VQAonBD", "number_match", 1.54),
        ("llama-3.3-70b-awq", "sumcontext", "W. Avg", "number_match", 37.4),
        ("qwq-32b-awq", "oracle", "ConvFinQA", "number_match", 85.4),
        ("qwq-32b-awq", "hyde", "TAT-DQA", "mrr@3", 20.7),
        ("qwq-32b-awq", "pretrained_only", "FinQA", "mrr@3", None),  # "-" in the paper
        ("llama-3.3-70b-awq", "hybrid_bm25", "TAT-DQA", "recall@3", 44.4),  # Table 5, for both generators
        ("qwq-32b-awq", "hybrid_bm25", "TAT-DQA", "recall@3", 44.4),
        ("qwq-32b-awq", "summarization", "FinQA", "recall@1", 37.7),
    ],
)
def test_transcribed_cells_are_the_papers(generator, method, subset, metric, printed):
    assert load_paper().value(generator, method, subset, metric) == printed


def test_table4_has_its_real_layout_one_weighted_row_per_model():
    table4 = load_paper().table4
    assert table4["intfloat/multilingual-e5-large-instruct"].metric("mrr@5") == 38.6
    assert table4["NovaSearch/stella_en_1.5B_v5"].metric("recall@1") == 2.7
    assert len(table4) == 5


def test_the_printed_weighted_averages_are_table2s_weighting_of_the_cells():
    """Recomputing each printed W. Avg from the four per-subset cells and Table 2's question counts lands within
    rounding (the paper prints one decimal; two of its 40 cells are 0.12-0.13 off), so a mistyped cell would show."""
    paper = load_paper()
    four = list(paper.table2)
    cells = [(g, m, metric) for g in paper.table3 for m in paper.table3[g] for metric in ("number_match", "mrr@3")]
    cells += [("qwq-32b-awq", m, metric) for m in paper.table5 for metric in ("recall@1", "recall@3")]
    checked = 0
    for generator, method, metric in cells:
        printed = paper.value(generator, method, "W. Avg", metric)
        recomputed = paper.weighted(generator, method, four, metric)
        if printed is None:
            continue
        assert recomputed == pytest.approx(printed, abs=0.15), (generator, method, metric)
        checked += 1
    assert checked == 42


def test_the_weighted_row_is_recomputed_over_the_runs_subsets():
    paper = load_paper()
    # Llama Base-RAG MRR@3 over FinQA and TAT-DQA alone: (38.7 x 8,281 + 25.2 x 11,349) / 19,630.
    expected = (38.7 * 8281 + 25.2 * 11349) / (8281 + 11349)
    assert paper.weighted("llama-3.3-70b-awq", "base", ["FinQA", "TAT-DQA"], "mrr@3") == pytest.approx(expected)
    assert paper.weighted("llama-3.3-70b-awq", "pretrained_only", ["FinQA"], "mrr@3") is None


def test_the_paper_config_differs_only_where_it_really_does():
    config = load_config("configs/paper_table3.yaml")
    assert config.data.split is None and config.data.subsets == ["FinQA", "ConvFinQA", "TAT-DQA"]
    assert setting_differences(load_paper(), config.model_dump(), PAPERS_DATA) == [
        "generator casperhansen/llama-3.3-70b-instruct-awq (paper: Llama 3.3 70B, checkpoint and precision not stated)",
        "subsets FinQA, ConvFinQA, TAT-DQA (paper: also VQAonBD; VQAonBD is not in the hub's current release)",
    ]
    qwq = load_config("configs/paper_table3.yaml", {"generator": "qwq-32b-awq"}).model_dump()
    assert setting_differences(load_paper(), qwq, PAPERS_DATA) == [
        "subsets FinQA, ConvFinQA, TAT-DQA (paper: also VQAonBD; VQAonBD is not in the hub's current release)"
    ]


def test_every_difference_is_named():
    config = load_config(None, {"retrieval": {"k": 5}, "generator": "qwen2.5-0.5b"}).model_dump()
    one_split = {**PAPERS_DATA, "subsets": {"FinQA": {"splits": ["test"], "questions": 1147, "contexts": 380}}}
    differences = setting_differences(load_paper(), config, one_split)
    assert differences == [
        "k = 5 (paper: 3)",
        "embedder all-MiniLM-L6-v2 (paper: intfloat/multilingual-e5-large-instruct)",
        "generator qwen2.5-coder-0.5b (paper: Llama 3.3 70B, QwQ 32B)",
        "subsets FinQA (paper: also ConvFinQA, VQAonBD, TAT-DQA; VQAonBD is not in the hub's current release)",
        "FinQA: test split(s), 1,147 questions over 380 contexts (paper: all splits, 8,281 over 2,789)",
    ]
    assert "corpus unknown" in setting_differences(load_paper(), config, None)[-1]


def test_comparison_subtracts_the_papers_value_per_generator():
    summaries = {
        "hybrid_bm25": {
            "subsets": {"FinQA": {"mrr@3": 47.5, "number_match": 25.0}, "TAT-DQA": {"recall@3": 50.0}},
            "weighted": {"mrr@3": 47.5},
        },
        "bm25_meta": {"subsets": {"FinQA": {"mrr@3": 96.3}}, "weighted": {"mrr@3": 96.3}},
    }
    header, rows = compare_with_paper(load_paper(), summaries)
    assert header == [
        "method", "subset", "metric", "paper table", "run",
        "paper Llama 3.3 70B", "run - paper Llama 3.3 70B", "paper QwQ 32B", "run - paper QwQ 32B",
    ]  # fmt: skip
    weighted = round((40.0 * 8281 + 29.2 * 11349) / (8281 + 11349), 2)
    weighted_qwq = round((39.8 * 8281 + 29.3 * 11349) / (8281 + 11349), 2)
    assert rows[:4] == [
        ["Hybrid BM25", "FinQA", "number_match", "3", 25.0, 41.7, -16.7, 41.8, -16.8],
        ["Hybrid BM25", "FinQA", "mrr@3", "3", 47.5, 40.0, 7.5, 39.8, 7.7],
        ["Hybrid BM25", "TAT-DQA", "recall@3", "5", 50.0, 44.4, 5.6, 44.4, 5.6],
        ["Hybrid BM25", "W. Avg of FinQA, TAT-DQA", "mrr@3", "3, recomputed", 47.5,
         weighted, round(47.5 - weighted, 2), weighted_qwq, round(47.5 - weighted_qwq, 2)],
    ]  # fmt: skip
    assert rows[4][0] == "bm25_meta (not in the paper)" and rows[4][5] is None and rows[4][7] is None


def test_table4_comparison_sets_a_run_beside_the_papers_models():
    run = {"intfloat/multilingual-e5-large-instruct": {"recall@1": 40.0, "recall@5": 60.0, "mrr@5": 50.0},
           "all-MiniLM-L6-v2": {"recall@1": 30.0, "recall@5": 50.0, "mrr@5": 40.0}}  # fmt: skip
    header, rows = compare_table4(load_paper(), run)
    assert header[0] == "model" and header[1:4] == ["run recall@1", "run recall@5", "run mrr@5"]
    assert rows[0] == ["intfloat/multilingual-e5-large-instruct (Multilingual E5-Instruct)", 40.0, 60.0, 50.0,
                       29.4, 53.3, 38.6]  # fmt: skip
    assert rows[1] == ["all-MiniLM-L6-v2", 30.0, 50.0, 40.0, None, None, None]
    assert len(rows) == 6 and rows[-1][1:4] == [None, None, None]


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


TABLES = Path(__file__).parent / "paper-tables.md"  # the project's transcription of the paper's tables
METHODS = {"Pretrained-Only": "pretrained_only", "Oracle Context": "oracle", "Base-RAG": "base",
           "Hybrid BM25": "hybrid_bm25", "Reranker": "reranker", "HyDE": "hyde", "Summarization": "summarization",
           "SumContext": "sumcontext"}  # fmt: skip
METRICS = {"NM": "number_match", "MRR@3": "mrr@3", "R@1": "recall@1", "R@3": "recall@3"}
GENERATORS = ("llama-3.3-70b-awq", "qwq-32b-awq")  # Table 5 is one table for both


def _printed_cells():
    """(generator, method, subset, metric, value) of every cell of Tables 3 and 5 as the transcription prints it."""
    generator, header = None, None
    for line in TABLES.read_text().splitlines():
        if line.startswith(("Llama 3.3-70B", "QwQ-32B", "## Table 5")):
            generator = {"L": ["llama-3.3-70b-awq"], "Q": ["qwq-32b-awq"]}.get(line[0], list(GENERATORS))
        if not line.startswith("| ") or generator is None:
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "method":
            header = [c.rsplit(" ", 1) for c in cells[1:]]
            continue
        if header is None or cells[0] not in METHODS:
            continue
        for (subset, metric), text in zip(header, cells[1:], strict=True):
            value = None if text == "-" else float(text)
            for g in generator:
                yield g, METHODS[cells[0]], subset, METRICS[metric], value


def test_every_cell_is_the_transcribed_tables():
    """Each of Table 3's and Table 5's cells against the transcription, so a one-point typo in a cell that no
    weighted average would reveal (ConvFinQA holds a tenth of the questions) is caught."""
    paper, checked = load_paper(), 0
    for generator, method, subset, metric, printed in _printed_cells():
        assert paper.value(generator, method, subset, metric) == printed, (generator, method, subset, metric)
        checked += 1
    assert checked == 2 * 8 * 10 + 2 * 6 * 10
