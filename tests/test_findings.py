"""`t2rag report` on a run with answers: the summary it prints first, and the outcome, gap and significance files
it writes, against the records."""

from __future__ import annotations

import csv
import json
import shutil

from t2rag.cli import main
from t2rag.metrics.outcomes import OUTCOMES, oracle_gap, outcome_counts
from t2rag.pipeline.records import read_records


def _csv(path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_the_report_leads_with_the_headline_and_writes_the_attribution(scripted_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(scripted_run, run)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"Report for {run}" and len(lines) < 45
    for method in ("oracle", "pretrained_only", "bm25", "bm25_meta"):
        assert any(line.startswith(f"| {method} ") for line in lines), method
    assert "Differences that hold at 0.05 after Holm's correction" in out
    tested = {(r["methods"], r["subset"], r["metric"]): r for r in _csv(run / "report" / "significance.csv")}
    ranked = tested["bm25 vs bm25_meta", "weighted", "mrr@3"]  # the one ranked pair, in the registry's order
    assert ranked["holds (Holm)"] == "yes" and float(ranked["a"]) < float(ranked["b"]) - 20
    assert f"- mrr@3: bm25 vs bm25_meta: {float(ranked['a']):.2f} against {float(ranked['b']):.2f}" in out, out
    assert "Where answers were lost against the oracle" in out and "outcomes.md" in out

    records = read_records(str(run))
    counts = outcome_counts(records)
    rows = _csv(run / "report" / "outcomes.csv")
    for row in rows:
        cell = counts[row["method"]][row["subset"]]
        assert int(row["answered"]) == sum(cell.values())
        for outcome in OUTCOMES:
            assert float(row[f"{outcome} %"]) == round(100 * cell[outcome] / sum(cell.values()), 2)
    assert {(r["method"], r["subset"]) for r in rows} == {(m, s) for m in counts for s in counts[m]}

    gaps = {r["method"]: r for r in _csv(run / "report" / "oracle_gap.csv")}
    assert set(gaps) == {"pretrained_only", "bm25", "bm25_meta"}
    for method, row in gaps.items():
        gap = oracle_gap(records, method)
        assert float(row["lost to retrieval"]) == gap["lost_to_retrieval"]
        assert float(row["lost to reading"]) == gap["lost_to_reading"]

    tests = _csv(run / "report" / "significance.csv")
    # Six answered pairs x Number Match, one ranked pair x (MRR@3, Recall@3); three subset rows each.
    assert len(tests) == (6 + 2) * 3
    assert {r["holds (Holm)"] for r in tests} == {"yes", "no"}
    for r in tests:  # plain numbers a spreadsheet or a plot reads
        low, high = json.loads(r["95% CI"])
        assert low <= float(r["a - b"]) <= high
    assert "## Summary" in (run / "report" / "report.md").read_text()
