"""`t2rag report` on a run with answers: the headline it prints first, and the outcome, gap and significance files
it writes, against the records."""

from __future__ import annotations

import csv
import json
import shutil

import pyarrow as pa

from t2rag.cli import main
from t2rag.reference import load_paper
from t2rag.results.findings import attributed, headline
from t2rag.results.significance import Difference
from t2rag.run_folder.files import read_records
from t2rag.run_folder.outcomes import OUTCOMES, oracle_gap, outcome_counts


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
    # Six answered pairs x (Number Match, EM, F1, exe_acc), one ranked pair x (MRR@3, Recall@3); three subset rows.
    assert len(tests) == (6 * 4 + 2) * 3
    assert {r["holds (Holm)"] for r in tests} == {"yes", "no"}
    for r in tests:  # plain numbers a spreadsheet or a plot reads
        low, high = json.loads(r["95% CI"])
        assert low <= float(r["a - b"]) <= high
    assert "## Headline" in (run / "report" / "report.md").read_text() and (run / "report" / "headline.md").exists()


def _wrong_at_rank_4():
    # bm25 answered wrong, with a number, no formula, the gold ranked 4th: read only when the run's k is 4 or more.
    return pa.table({"method": ["bm25"], "subset": ["FinQA"], "id": ["q1"], "number_match": [False],
                     "gold_rank": pa.array([4], pa.int32()), "prediction": [1.0],
                     "formula": pa.nulls(1, pa.string()), "formula_ok": pa.nulls(1, pa.bool_())})  # fmt: skip


def test_outcomes_read_the_runs_own_k():
    def outcome(manifest):
        return attributed(_wrong_at_rank_4(), manifest).column("outcome").to_pylist()

    assert outcome({"config": {"retrieval": {"k": 5}}}) == ["wrong_number"]
    assert outcome({"config": {"retrieval": {"k": 3}}}) == ["gold_not_read"]
    assert outcome(None) == ["gold_not_read"]  # unknown: the default k of 3


def test_the_headline_lists_the_largest_differences_first():
    def diff(pair: str, metric: str, d: float) -> Difference:
        return Difference(pair, "weighted", metric, 50 + d, 50, d, [d - 1, d + 1], 0.001, "t", 100)

    found = [diff("a vs b", "mrr@3", 2.0), diff("a vs c", "number_match", -1.0), diff("b vs c", "mrr@3", -9.0),
             diff("a vs d", "number_match", 5.0)]  # fmt: skip
    empty = pa.table({"method": pa.array([], pa.string()), "subset": pa.array([], pa.string()),
                      "id": pa.array([], pa.string()), "outcome": pa.array([], pa.string())})  # fmt: skip
    text = headline({}, empty, load_paper(), found, [True] * 4, {"x": "report/x.md"})
    listed = [line.split(": ")[1] for line in text.splitlines() if line.startswith(("- mrr@3", "- number_match"))]
    # Number Match first, then MRR@3, each by the size of the difference
    assert listed == ["a vs d", "a vs c", "b vs c", "a vs b"], text
