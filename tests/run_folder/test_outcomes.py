"""Outcome attribution on a real run's records (the bundled sample, answered by the scripted server), checked
against an independent reading of the same records: the gold id among the contexts the generator read, and the
parse columns."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from t2rag.data import load_questions
from t2rag.methods import readers_of
from t2rag.run_folder.files import read_records
from t2rag.run_folder.outcomes import OUTCOMES, gold_read, oracle_gap, outcome_counts, outcomes, with_outcomes

K = 3  # the default config's retrieval.k, what the scripted run's generator read


@pytest.fixture(scope="module")
def records(scripted_run):
    return read_records(scripted_run)


@pytest.fixture(scope="module")
def gold_ids() -> dict[tuple[str, str], str]:
    table = load_questions(None).table
    keys = zip(table.column("subset").to_pylist(), table.column("id").to_pylist(), strict=True)
    return dict(zip(keys, table.column("context_id").to_pylist(), strict=True))


def _expected(row: dict, gold: str) -> str | None:
    if row["number_match"] is None:
        return None
    if row["number_match"]:
        return "correct"
    if row["method"] == "oracle":
        read = True
    elif row["method"] == "pretrained_only":
        read = False
    else:
        read = gold in (row["context_ids"] or [])[:K]
    if not read:
        return "gold_not_read"
    if row["formula"] is not None and not row["formula_ok"]:
        return "formula_error"
    if row["prediction"] is None:
        return "no_answer"
    return "wrong_number"


def test_every_answered_record_has_the_outcome_an_independent_reading_gives(records, gold_ids):
    rows = records.to_pylist()
    for row in rows:
        assert row["outcome"] == _expected(row, gold_ids[(row["subset"], row["id"])]), row
    seen = Counter(r["outcome"] for r in rows if r["outcome"] is not None)
    assert set(seen) == set(OUTCOMES), seen  # the scripted answers reach every outcome


def test_outcomes_partition_the_answered_records_and_the_oracle_always_reads_its_gold(records):
    answered = pc.is_valid(records.column("number_match"))
    assert pc.all(pc.equal(answered, pc.is_valid(records.column("outcome")))).as_py()
    counts = outcome_counts(records)
    for method in ("oracle", "pretrained_only", "bm25", "bm25_meta"):
        mine = records.filter(pc.and_(pc.equal(records.column("method"), method), answered))
        assert sum(counts[method]["all"].values()) == mine.num_rows == 240
        matched = int(pc.sum(pc.cast(mine.column("number_match"), "int64")).as_py())
        assert counts[method]["all"]["correct"] == matched
        by_subset = [sum(counts[method][s].values()) for s in ("FinQA", "TAT-DQA")]
        assert sum(by_subset) == 240 and all(by_subset)
    assert counts["oracle"]["all"]["gold_not_read"] == 0
    assert counts["pretrained_only"]["all"]["gold_not_read"] == 240 - counts["pretrained_only"]["all"]["correct"]


def test_the_gap_to_the_oracle_splits_into_retrieval_and_reading(records, gold_ids):
    for method in ("bm25", "bm25_meta", "pretrained_only"):
        gap = oracle_gap(records, method)
        assert gap is not None and gap["questions"] == 240
        parts = gap["lost_to_retrieval"] + gap["lost_to_reading"] - gap["gained"]
        assert gap["gap"] == pytest.approx(parts, abs=0.015)  # each part rounded to 0.01
        # Independently: questions the oracle got right and this method did not, by whether it read the gold.
        rows = {(r["subset"], r["id"], r["method"]): r for r in records.to_pylist() if r["number_match"] is not None}
        lost_retrieval = lost_reading = 0
        for (subset, qid, m), row in rows.items():
            if m != method or not rows[(subset, qid, "oracle")]["number_match"] or row["number_match"]:
                continue
            read = method != "pretrained_only" and gold_ids[(subset, qid)] in row["context_ids"][:K]
            lost_reading += read
            lost_retrieval += not read
        assert gap["lost_to_retrieval"] == round(100 * lost_retrieval / 240, 2)
        assert gap["lost_to_reading"] == round(100 * lost_reading / 240, 2)
    assert oracle_gap(records, "bm25")["lost_to_retrieval"] > oracle_gap(records, "bm25_meta")["lost_to_retrieval"]


def test_records_written_before_the_column_get_the_same_outcomes(records):
    old = records.drop_columns(["outcome"])
    refilled = with_outcomes(old, K, readers_of(old.column("method").to_pylist()))
    assert refilled.column("outcome").to_pylist() == records.column("outcome").to_pylist()
    assert with_outcomes(records, K, {}) is records  # nothing missing, nothing recomputed


def test_where_a_grade_chose_the_contexts_the_gold_was_read_only_when_chosen():
    """A self_rag row ranks the gold first but its grade kept another context: the gold was not read; a grade that
    kept the gold, or no grade (null: the top k), reads it."""
    records = pa.table({
        "method": ["self_rag"] * 4,
        "gold_rank": pa.array([1, 1, 1, 4], pa.int32()),
        "context_ids": [["g", "a", "b"], ["g", "a", "b"], ["g", "a", "b"], ["a", "b", "c", "g"]],
        "reader_ids": pa.array([["a"], ["a", "g"], None, ["g"]], pa.list_(pa.string())),
    })  # fmt: skip
    assert gold_read(records, 3, readers_of(["self_rag"])).tolist() == [False, True, True, True]


def test_the_gap_counts_only_questions_both_answered():
    # bm25 answered q1..q4, the oracle q1..q3 (q4 failed before an answer): the gap is over q1..q3 only.
    rows = [("bm25", "q1", "correct"), ("bm25", "q2", "gold_not_read"), ("bm25", "q3", "wrong_number"),
            ("bm25", "q4", "correct"),
            ("oracle", "q1", "correct"), ("oracle", "q2", "correct"), ("oracle", "q3", "wrong_number"),
            ("oracle", "q4", None)]  # fmt: skip
    method, ids, outcome = (list(c) for c in zip(*rows, strict=True))
    records = pa.table({"method": method, "subset": ["FinQA"] * len(rows), "id": ids, "outcome": outcome})
    gap = oracle_gap(records, "bm25")
    assert gap == {"questions": 3, "method_nm": 33.33, "oracle_nm": 66.67, "gap": 33.33,
                   "lost_to_retrieval": 33.33, "lost_to_reading": 0.0, "gained": 0.0}  # fmt: skip
    assert oracle_gap(records, "pretrained_only") is None


def _answered(rows: list[tuple]) -> pa.Table:
    """Records of (method, subset, id, number_match, gold_rank, prediction, formula, formula_ok)."""
    method, subset, ids, nm, rank, prediction, formula, ok = (list(c) for c in zip(*rows, strict=True))
    return pa.table({"method": method, "subset": subset, "id": ids, "number_match": pa.array(nm, pa.bool_()),
                     "gold_rank": pa.array(rank, pa.int32()), "prediction": pa.array(prediction, pa.float64()),
                     "formula": pa.array(formula, pa.string()), "formula_ok": pa.array(ok, pa.bool_())})  # fmt: skip


SMALL = [
    ("bm25", "FinQA", "q1", True, 5, 1.0, None, None),  # right, whatever it read
    ("bm25", "FinQA", "q2", False, 4, 1.0, None, None),  # gold ranked 4th of k = 3
    ("bm25", "FinQA", "q3", False, 2, float("nan"), "divide(1, 0", False),  # a formula that does not evaluate
    ("bm25", "TAT-DQA", "q4", False, 3, float("nan"), None, None),  # no number
    ("bm25", "TAT-DQA", "q5", False, 1, 2.0, "add(1, 1)", True),  # a number, wrong
    ("bm25", "TAT-DQA", "q6", None, 1, None, None, None),  # not answered
    ("pretrained_only", "FinQA", "q1", False, 0, 3.0, None, None),  # reads nothing: never the gold
    ("oracle", "FinQA", "q1", False, None, 3.0, None, None),  # reads the gold whatever its rank
]


def test_each_outcome_is_the_first_that_holds_on_small_records():
    records = _answered(SMALL)
    reads = readers_of(records.column("method").to_pylist())
    assert gold_read(records, 3, reads).tolist() == [False, False, True, True, True, True, False, True]
    assert gold_read(records, 4, reads).tolist()[:2] == [False, True]
    assert outcomes(records, 3, reads).to_pylist() == [
        "correct", "gold_not_read", "formula_error", "no_answer", "wrong_number", None, "gold_not_read",
        "wrong_number"]  # fmt: skip
    filled = with_outcomes(records, 3, reads)
    assert filled.column("outcome").to_pylist() == outcomes(records, 3, reads).to_pylist()
    kept = filled.set_column(filled.column_names.index("outcome"), "outcome",
                             pa.array(["wrong_number", *[None] * 7], pa.string()))  # fmt: skip
    refilled = with_outcomes(kept, 3, reads).column("outcome").to_pylist()
    assert refilled[0] == "wrong_number" and refilled[1:] == filled.column("outcome").to_pylist()[1:]


def test_outcome_counts_per_subset_and_over_all():
    records = with_outcomes(_answered(SMALL), 3, readers_of(["bm25", "pretrained_only", "oracle"]))
    counts = outcome_counts(records)
    assert counts["bm25"]["FinQA"] == {"correct": 1, "gold_not_read": 1, "formula_error": 1, "no_answer": 0,
                                       "wrong_number": 0}  # fmt: skip
    assert counts["bm25"]["TAT-DQA"] == {"correct": 0, "gold_not_read": 0, "formula_error": 0, "no_answer": 1,
                                         "wrong_number": 1}  # fmt: skip
    assert counts["bm25"]["all"] == {o: 1 for o in OUTCOMES}
    assert set(counts) == {"bm25", "pretrained_only", "oracle"} and counts["oracle"]["all"]["wrong_number"] == 1


def test_a_missing_verdict_rank_or_formula_check_counts_as_no():
    records = _answered([
        ("bm25", "FinQA", "q1", False, None, 1.0, None, None),  # ranked nothing: the gold was not read
        ("pretrained_only", "FinQA", "q1", False, 1, 1.0, None, None),  # a rank, but it reads nothing
        ("bm25", "FinQA", "q2", False, 1, float("nan"), "add(1, x)", None),  # a formula not known to evaluate
    ])  # fmt: skip
    reads = readers_of(["bm25", "pretrained_only"])
    assert gold_read(records, 3, reads).tolist() == [False, False, True]
    assert outcomes(records, 3, reads).to_pylist() == ["gold_not_read", "gold_not_read", "formula_error"]


def test_records_with_every_outcome_are_returned_as_they_are():
    records = with_outcomes(_answered(SMALL), 3, readers_of(["bm25", "pretrained_only", "oracle"]))
    assert with_outcomes(records, 3, {}) is records  # nothing missing: nothing computed (no method looked up)
    unanswered = _answered([("bm25", "FinQA", "q1", None, 1, None, None, None)])
    filled = with_outcomes(unanswered, 3, readers_of(["bm25"]))
    assert filled.column("outcome").to_pylist() == [None] and filled.schema.field("outcome").type == pa.string()


def test_outcomes_add_up_over_subsets():
    rows = [("bm25", subset, f"{subset}{i}", False, 5, 1.0, None, None) for subset in ("FinQA", "TAT-DQA")
            for i in range(2)]  # fmt: skip
    records = with_outcomes(_answered(rows), 3, readers_of(["bm25"]))
    counts = outcome_counts(records)["bm25"]
    assert counts["FinQA"]["gold_not_read"] == counts["TAT-DQA"]["gold_not_read"] == 2
    assert counts["all"]["gold_not_read"] == 4


def test_the_gap_splits_into_what_was_lost_and_what_was_gained():
    # Six questions: the oracle right on q1-q5; the method did not read the gold on q1-q3, read it and erred on q4,
    # was right on q5, and right on q6 where the oracle erred.
    mine = ["gold_not_read", "gold_not_read", "gold_not_read", "wrong_number", "correct", "correct"]
    theirs = ["correct", "correct", "correct", "correct", "correct", "wrong_number"]
    ids = [f"q{i}" for i in range(1, 7)]
    records = pa.table({"method": ["bm25"] * 6 + ["oracle"] * 6, "subset": ["FinQA"] * 12, "id": ids * 2,
                        "outcome": mine + theirs})  # fmt: skip
    assert oracle_gap(records, "bm25") == {"questions": 6, "method_nm": 33.33, "oracle_nm": 83.33, "gap": 50.0,
                                           "lost_to_retrieval": 50.0, "lost_to_reading": 16.67,
                                           "gained": 16.67}  # fmt: skip
