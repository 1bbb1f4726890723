"""Why an answer is right or wrong: one outcome per answered record, and a method's gap to the oracle split into
what retrieval lost and what reading lost.

An answered record (one with a Number Match verdict) gets exactly one outcome, the first that holds:

- correct: Number Match;
- gold_not_read: wrong, and the gold context was not among the contexts the generator read;
- formula_error: wrong, gold read, and a formula was given that does not evaluate;
- no_answer: wrong, gold read, and no number could be read (no parseable answer, a failed generation, or the
  model said the excerpts lack it: `"final_formula": "None"`);
- wrong_number: wrong, gold read, and a number that does not match.

What the generator read: nothing (`pretrained_only`), the gold context (`oracle`), or the top `k` of the ranked
contexts (retrieving methods, summaries included), so the gold was read when its rank is 1..k.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

OUTCOMES = ("correct", "gold_not_read", "formula_error", "no_answer", "wrong_number")


def _bools(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return values.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


def gold_read(records: pa.Table, k: int, reads: Mapping[str, str]) -> np.ndarray:
    """Whether each record's generator read the gold context; `reads` maps each method to what its generator reads
    (`Method.reader`: none, gold, retrieved_context or retrieved_summary)."""
    kind = np.asarray([reads[m] for m in records.column("method").to_pylist()], dtype=object)
    ranks = records.column("gold_rank").fill_null(0).to_numpy(zero_copy_only=False)
    read = (kind == "gold") | ((kind != "none") & (ranks >= 1) & (ranks <= k))
    if "reader_ids" not in records.column_names:
        return read
    # Where a grade chose what the generator read (t2rag.stages.grade), the gold was read when it was chosen; only
    # those rows (null `reader_ids` elsewhere) are looked at one by one.
    graded = np.flatnonzero(pc.is_valid(records.column("reader_ids")).to_numpy(zero_copy_only=False))
    if graded.size:
        rows = pa.array(graded)
        chosen = records.column("reader_ids").take(rows).to_pylist()
        ranked = records.column("context_ids").take(rows).to_pylist()
        read[graded] = [
            bool(rank >= 1 and ids[rank - 1] in picked)
            for picked, ids, rank in zip(chosen, ranked, ranks[graded].tolist(), strict=True)
        ]
    return read


def outcomes(records: pa.Table, k: int, reads: Mapping[str, str]) -> pa.Array:
    """The outcome of every record (null where there is no Number Match verdict); `k` is how many ranked contexts
    the generator read (the run config's `retrieval.k`), `reads` as for `gold_read`."""
    answered = pc.is_valid(records.column("number_match")).to_numpy(zero_copy_only=False)
    correct = _bools(records.column("number_match"))
    read = gold_read(records, k, reads)
    has_number = np.isfinite(records.column("prediction").to_numpy(zero_copy_only=False).astype(float))
    failed_formula = pc.is_valid(records.column("formula")).to_numpy(zero_copy_only=False) & ~_bools(
        records.column("formula_ok")
    )
    chosen = np.select(
        [correct, ~read, failed_formula, ~has_number],
        ["correct", "gold_not_read", "formula_error", "no_answer"],
        default="wrong_number",
    )
    return pa.array(np.where(answered, chosen, None).tolist(), pa.string())


def with_outcomes(records: pa.Table, k: int, reads: Mapping[str, str]) -> pa.Table:
    """`records` with every missing outcome filled in (records written before the column existed)."""
    current = records.column("outcome") if "outcome" in records.column_names else pa.nulls(records.num_rows)
    missing = pc.and_(pc.is_null(current), pc.is_valid(records.column("number_match")))
    if "outcome" in records.column_names and not pc.any(missing).as_py():
        return records
    filled = pc.coalesce(pc.cast(current, pa.string()), outcomes(records, k, reads))
    if "outcome" in records.column_names:
        return records.set_column(records.column_names.index("outcome"), "outcome", filled)
    return records.append_column("outcome", filled)


def outcome_counts(records: pa.Table) -> dict[str, dict[str, dict[str, int]]]:
    """{method: {subset or "all": {outcome: count}}} over the answered records (those with an outcome)."""
    answered = records.filter(pc.is_valid(records.column("outcome")))
    grouped = answered.group_by(["method", "subset", "outcome"]).aggregate([("id", "count")]).to_pylist()
    out: dict[str, dict[str, dict[str, int]]] = {}
    for r in grouped:
        cells = out.setdefault(r["method"], {})
        for key in (r["subset"], "all"):
            counts = cells.setdefault(key, dict.fromkeys(OUTCOMES, 0))
            counts[r["outcome"]] += int(r["id_count"])
    return out


def oracle_gap(records: pa.Table, method: str, oracle: str = "oracle") -> dict[str, float | int] | None:
    """A method's Number Match gap to the oracle over the questions both answered, in points: `lost_to_retrieval`
    (oracle right, the method did not read the gold), `lost_to_reading` (oracle right, gold read, the method wrong)
    and `gained` (oracle wrong, the method right), so that gap = lost_to_retrieval + lost_to_reading - gained.
    None when the two share no answered question."""
    answered = records.filter(pc.is_valid(records.column("outcome")))
    mine = _by_id(answered, method)
    theirs = _by_id(answered, oracle)
    common = sorted(mine.keys() & theirs.keys())
    if not common:
        return None
    m = np.asarray([mine[i] for i in common], dtype=object)
    o = np.asarray([theirs[i] for i in common], dtype=object) == "correct"
    n = len(common)

    def points(mask: np.ndarray) -> float:
        return round(100 * float(mask.sum()) / n, 2)

    return {
        "questions": n,
        "method_nm": points(m == "correct"),
        "oracle_nm": points(o),
        "gap": round(100 * (int(o.sum()) - int((m == "correct").sum())) / n, 2),
        "lost_to_retrieval": points(o & (m == "gold_not_read")),
        "lost_to_reading": points(o & (m != "correct") & (m != "gold_not_read")),
        "gained": points(~o & (m == "correct")),
    }


def _by_id(records: pa.Table, method: str) -> dict[str, str]:
    part = records.filter(pc.equal(records.column("method"), method))
    keys = [
        f"{s}\x1f{i}" for s, i in zip(part.column("subset").to_pylist(), part.column("id").to_pylist(), strict=True)
    ]
    return dict(zip(keys, part.column("outcome").to_pylist(), strict=True))
