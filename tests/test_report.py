"""The report's retrieval ablation table, from a run's records."""

from __future__ import annotations

import csv

from t2rag.config import load_config
from t2rag.pipeline.local import run_local
from t2rag.report import ABLATION_COMPONENTS, write_report


def test_ablation_table_marks_components_and_matches_the_summary(tmp_path) -> None:
    methods = ["bm25", "bm25_numeric", "bm25_meta"]
    fields = {"methods": methods, "retrieval_only": True, "data": {"subsets": ["FinQA"]}, "out": str(tmp_path)}
    result = run_local(load_config(None, fields))
    written = write_report(str(tmp_path))
    assert written["retrieval_ablation"].endswith("retrieval_ablation.md")
    with open(tmp_path / "report" / "retrieval_ablation.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["method"] for r in rows] == methods
    on = {r["method"]: {c for c in ABLATION_COMPONENTS if r[c] == "x"} for r in rows}
    assert on == {
        "bm25": {"lexical"},
        "bm25_numeric": {"lexical", "numeric"},
        "bm25_meta": {"lexical", "numeric", "metadata"},
    }
    for r in rows:
        summary = result["methods"][r["method"]]
        assert float(r["FinQA mrr@3"]) == summary["subsets"]["FinQA"]["mrr@3"]
        assert float(r["W. Avg recall@5"]) == summary["weighted"]["recall@5"]
    mrr = [float(r["FinQA mrr@3"]) for r in rows]
    assert mrr[0] < mrr[1] < mrr[2]  # each component adds on the real FinQA dev questions
    assert "Retrieval ablation" in (tmp_path / "report" / "report.md").read_text()


def test_no_ablation_table_for_the_papers_methods_alone(tmp_path) -> None:
    fields = {"methods": ["bm25"], "retrieval_only": True, "data": {"subsets": ["FinQA"]}, "out": str(tmp_path)}
    run_local(load_config(None, fields))
    assert "retrieval_ablation" not in write_report(str(tmp_path))
