"""One plan for every runner: which (method, question) rows still need work, and through which stages."""

from __future__ import annotations

from t2rag.config import load_config
from t2rag.methods import ANSWER, DENSE, METHODS
from t2rag.stages.work import work_left

CONFIGS = {
    "retrieval": {"methods": ["bm25", "base", "hybrid_rrf"], "retrieval_only": True},
    "generation": {
        "methods": ["pretrained_only", "oracle", "bm25", "base", "reranker", "hyde"],
        "retrieval_only_methods": ["base"],
        "generator": "smollm2-135m",
        "limit": 3,
        "seed": 4,
    },
    "summaries": {"methods": ["summarization", "sumcontext"], "generator": "smollm2-135m", "limit": 2},
}


def _as_rows(groups) -> list[tuple]:
    return [(g.stages, g.rows.to_pylist()) for g in groups]


def test_plan_rows_stages_and_resume(sample, tmp_path):
    config = load_config(None, {**CONFIGS["generation"], "out": str(tmp_path)})
    scored = sample.scored()
    first = scored.column("id")[0].as_py()
    groups = {g.stages: g.rows for g in work_left(config, sample, {("bm25", first)})}
    per_method: dict[tuple[str, bool], int] = {}
    for stages, rows in groups.items():
        for method in rows.column("method").to_pylist():
            key = (method, stages[-len(ANSWER) :] == ANSWER)
            per_method[key] = per_method.get(key, 0) + 1
    n, sample_size = scored.num_rows, 3 * len(sample.subsets)
    assert per_method == {
        ("pretrained_only", True): sample_size,
        ("oracle", True): sample_size,
        ("bm25", False): n - sample_size - 1,  # the one with a record is not planned again
        ("bm25", True): sample_size,
        ("base", False): n,  # retrieval-only in this run
        ("reranker", False): n - sample_size,
        ("reranker", True): sample_size,
        ("hyde", True): sample_size,  # HyDE generates its query, so it runs on the sample alone
    }
    assert METHODS["hyde"].chain(True) in groups and METHODS["reranker"].chain(False) in groups
    retrieval = groups[METHODS["reranker"].chain(False)]
    assert retrieval.column("gold_context").null_count == retrieval.num_rows  # gold text only for answering rows
    answering = groups[METHODS["oracle"].chain(True)]
    assert answering.column("gold_context").null_count == 0


def test_rows_come_by_question_then_method(sample, tmp_path):
    """So that a block embeds each question once for every method that shares it."""
    config = load_config(None, {**CONFIGS["retrieval"], "out": str(tmp_path)})
    dense = {g.stages: g.rows for g in work_left(config, sample)}[DENSE].to_pylist()
    assert [(r["id"], r["method"]) for r in dense[:4]] == [
        (dense[0]["id"], "base"),
        (dense[0]["id"], "hybrid_rrf"),
        (dense[2]["id"], "base"),
        (dense[2]["id"], "hybrid_rrf"),
    ]
    assert dense[0]["id"] != dense[2]["id"] and len(dense) == 2 * sample.scored().num_rows
