"""The report from a run's records: the retrieval ablation, intervals, curves, the paper beside the run, plots."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.pipeline.local import run_local
from t2rag.results.report import write_report
from t2rag.retrieval.config import INGREDIENTS
from t2rag.run_folder.files import read_records, write_records
from t2rag.run_folder.records import to_records
from t2rag.run_folder.scorecards import wilson_interval
from tests.conftest import HASHING


def test_ablation_table_marks_components_and_matches_the_summary(tmp_path) -> None:
    methods = ["bm25", "bm25_numeric", "bm25_meta"]
    fields = {"methods": methods, "retrieval_only": True, "data": {"subsets": ["FinQA"]}, "out": str(tmp_path)}
    result = run_local(load_config(None, fields))
    written = write_report(str(tmp_path))
    assert written["retrieval_ablation"].endswith("retrieval_ablation.md")
    with open(tmp_path / "report" / "retrieval_ablation.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["method"] for r in rows] == methods
    on = {r["method"]: {c for c in INGREDIENTS if r[c] == "x"} for r in rows}
    assert on == {
        "bm25": {"lexical"},
        "bm25_numeric": {"lexical", "numeric"},
        "bm25_meta": {"lexical", "numeric", "metadata"},
    }
    for r in rows:
        scorecard = result["methods"][r["method"]]
        assert float(r["FinQA mrr@3"]) == scorecard["subsets"]["FinQA"]["mrr@3"]
        assert float(r["W. Avg recall@5"]) == scorecard["weighted"]["recall@5"]
    mrr = [float(r["FinQA mrr@3"]) for r in rows]
    assert mrr[0] < mrr[1] < mrr[2]  # each component adds on the real FinQA dev questions
    assert "Retrieval ablation" in (tmp_path / "report" / "report.md").read_text()


def test_no_ablation_table_for_the_papers_methods_alone(tmp_path) -> None:
    fields = {"methods": ["bm25"], "retrieval_only": True, "data": {"subsets": ["FinQA"]}, "out": str(tmp_path)}
    run_local(load_config(None, fields))
    assert "retrieval_ablation" not in write_report(str(tmp_path))


def test_report_has_intervals_curves_the_paper_beside_and_plots(tmp_path) -> None:
    fields = {"methods": ["bm25"], "retrieval_only": True, "data": {"subsets": ["FinQA"]}, "out": str(tmp_path)}
    result = run_local(load_config(None, fields))
    ids = read_records(str(tmp_path)).column("id").to_pylist()[:20]
    answers = pa.table(
        {
            "id": ids,
            "subset": ["FinQA"] * 20,
            "method": ["oracle"] * 20,
            "raw_output": ["{}"] * 20,
            "number_match": [i < 5 for i in range(20)],
            "reference": [1.0] * 20,
        }
    )
    write_records(str(tmp_path), to_records(answers), "oracle-answers")
    written = write_report(str(tmp_path))

    with open(tmp_path / "report" / "table3.csv") as f:
        table3 = {r["method"]: r for r in csv.DictReader(f)}
    assert float(table3["oracle"]["W. Avg NM"]) == 25.0
    assert table3["oracle"]["W. Avg NM 95% CI"] == str(wilson_interval(5, 20))

    with open(tmp_path / "report" / "retrieval_curves.csv") as f:
        curves = {r["metric"]: r for r in csv.DictReader(f) if r["method"] == "bm25"}
    mrr = [float(curves["MRR@k"][f"k={k}"]) for k in range(1, 11)]
    recall = [float(curves["Recall@k"][f"k={k}"]) for k in range(1, 11)]
    assert mrr == sorted(mrr) and recall == sorted(recall) and mrr[0] == recall[0]
    assert mrr[2] == round(result["methods"]["bm25"]["weighted"]["mrr@3"], 2)
    assert recall[4] == round(result["methods"]["bm25"]["weighted"]["recall@5"], 2)

    for plot in ("retrieval_curves_plot", "number_match_plot"):
        assert Path(written[plot]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (tmp_path / "report" / "report.md").read_text()
    assert "FinQA: split(s) dev; 883 questions searched against 299 contexts" in report
    assert "This run's setting differs from the paper's" in report
    assert "FinQA: dev split(s), 883 questions over 299 contexts (paper: all splits, 8,281 over 2,789)" in report
    with open(tmp_path / "report" / "paper_comparison.csv") as f:
        compared = list(csv.DictReader(f))
    assert {(r["method"], r["metric"]) for r in compared} == {
        ("bm25 (not in the paper)", "mrr@3"),
        ("bm25 (not in the paper)", "recall@1"),
        ("bm25 (not in the paper)", "recall@3"),
        ("Oracle Context", "number_match"),
    }
    oracle = next(r for r in compared if r["method"] == "Oracle Context" and r["subset"] == "FinQA")
    assert float(oracle["paper Llama 3.3 70B"]) == 79.4 and float(oracle["run - paper QwQ 32B"]) == -47.4


def test_report_prints_the_paper_beside_a_real_run(capsys, tmp_path, mini_data) -> None:
    """A retrieval run of real dev questions (those of 25 contexts per subset; the dense methods with the hashing
    embedder: the report is under test, not a model's vectors): every compared cell of a paper method has the
    paper's value for both generators, under the list of setting differences, printed by `t2rag report`."""
    fields = {"methods": ["bm25", "base", "hybrid_bm25"], "retrieval_only": True, "out": str(tmp_path),
              "data": {"source": mini_data}, "retrieval": HASHING}  # fmt: skip
    result = run_local(load_config(None, fields))
    assert main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "embedder hashing (paper: intfloat/multilingual-e5-large-instruct)" in out
    assert "FinQA: dev split(s), 79 questions over 25 contexts (paper: all splits, 8,281 over 2,789)" in out
    assert "subsets FinQA, TAT-DQA (paper: also ConvFinQA, VQAonBD;" in out

    with open(tmp_path / "report" / "paper_comparison.csv") as f:
        rows = list(csv.DictReader(f))
    paper_columns = ["paper Llama 3.3 70B", "run - paper Llama 3.3 70B", "paper QwQ 32B", "run - paper QwQ 32B"]
    ours = [r for r in rows if r["method"] in ("Base-RAG", "Hybrid BM25")]
    assert len(ours) == 2 * 3 * 3  # two methods x (FinQA, TAT-DQA, weighted) x (MRR@3, R@1, R@3)
    assert all(r[c] != "" for r in ours for c in paper_columns)
    base_finqa = next(
        r for r in ours if r["method"] == "Base-RAG" and r["subset"] == "FinQA" and r["metric"] == "mrr@3"
    )
    run_value = result["methods"]["base"]["subsets"]["FinQA"]["mrr@3"]
    assert float(base_finqa["run"]) == run_value and float(base_finqa["paper Llama 3.3 70B"]) == 38.7
    assert float(base_finqa["run - paper Llama 3.3 70B"]) == round(run_value - 38.7, 2)
    assert {r["subset"] for r in ours} == {"FinQA", "TAT-DQA", "W. Avg of FinQA, TAT-DQA"}
    assert all(r[c] == "" for r in rows if r["method"].startswith("bm25") for c in paper_columns)
    # The terminal leads with the headline: one row per method, the paper's weighted MRR@3 beside the run's.
    base = next(line for line in out.splitlines() if line.startswith("| base "))
    cells = [c.strip() for c in base.strip("|").split("|")]
    assert float(cells[4]) == round(result["methods"]["base"]["weighted"]["mrr@3"], 2)
    assert float(cells[-1]) == float(next(r for r in ours if r["method"] == "Base-RAG" and r["metric"] == "mrr@3"
                                          and r["subset"].startswith("W. Avg"))["paper Llama 3.3 70B"])  # fmt: skip
    assert "- mrr@3: base vs bm25: " in out  # a real lead, the paper's method first
    assert len(out.splitlines()) < 40 and "paper_comparison.md" in out


def test_methods_come_in_one_order_whatever_order_the_records_were_read_in() -> None:
    """Which pairs a report tests, and which way round, must not depend on the order of the record files."""
    import itertools

    from t2rag.results.report import ordered_methods

    expected = ["oracle", "hybrid_bm25", "bm25", "bm25_meta", "bm25_page"]
    for order in itertools.permutations(expected):
        assert ordered_methods(list(order)) == expected
    assert ordered_methods(["mine", "bm25", "oracle"]) == ["oracle", "bm25", "mine"]  # unregistered ones last


def test_a_source_without_original_answers_has_no_em_and_the_report_says_why(tmp_path, tiny_data) -> None:
    """Without `original_answer` the data loads, Number Match and execution accuracy are as with it, EM and F1 are
    absent, and the report's answers table says why."""
    from tests.conftest import write_layout
    from tests.scripted_server import scripted_for

    bare = {}
    for subset in ("FinQA", "TAT-DQA"):
        table = pa.concat_tables(
            [pa.parquet.read_table(p) for p in sorted((Path(tiny_data) / "data" / subset).rglob("*.parquet"))]
        )
        bare[subset] = table.drop_columns(["original_answer"])
    stripped = str(write_layout(tmp_path / "bare", bare))
    cards = {}
    for name, data in (("with", tiny_data), ("without", stripped)):
        with scripted_for(data) as generator:
            config = load_config(None, {"data": {"source": data}, "methods": ["oracle"], "generator": generator,
                                        "out": str(tmp_path / name)})  # fmt: skip
            cards[name] = run_local(config)["methods"]["oracle"]["weighted"]
    assert cards["with"]["number_match"] == cards["without"]["number_match"]
    assert cards["with"]["exe_acc"] == cards["without"]["exe_acc"]
    assert "em" in cards["with"] and "em" not in cards["without"] and "f1" not in cards["without"]
    written = write_report(str(tmp_path / "without"))
    answers = Path(written["answers"]).read_text()
    assert "No EM or F1 for oracle" in answers and "`original_answer`" in answers
    with_em = Path(write_report(str(tmp_path / "with"))["answers"]).read_text()
    assert "No EM or F1" not in with_em and "W. Avg" in with_em
