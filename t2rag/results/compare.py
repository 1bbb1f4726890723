"""`t2rag compare A B`: paired differences between two runs (or two methods), over the questions both scored.

A and B are `RUN_DIR` or `RUN_DIR:METHOD` (local or `s3://`; A and B may be the same run). Two methods named:
that pair. One named: that method in both runs. None named: every method the two runs share, each against
itself. Runs on different data (another split, subset or corpus, by their manifests) or sharing no scored
question are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.errors import InputError
from t2rag.results.significance import ANSWER_METRICS, ROUTING_METRICS, Difference, compare
from t2rag.run_folder.files import read_manifest, read_records
from t2rag.run_folder.scorecards import DEFAULT_RETRIEVAL_METRICS

#: Every metric a scorecard has, in its order.
METRICS = (*ANSWER_METRICS, *DEFAULT_RETRIEVAL_METRICS, *ROUTING_METRICS)
_COLUMNS = ["id", "subset", "method", "gold_rank", *ANSWER_METRICS, *ROUTING_METRICS]


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a run and, optionally, one of its methods."""

    run: str
    method: str | None
    records: pa.Table
    manifest: dict | None

    @property
    def methods(self) -> list[str]:
        return list(dict.fromkeys(self.records.column("method").to_pylist()))


def parse_side(spec: str) -> tuple[str, str | None]:
    """`RUN_DIR` or `RUN_DIR:METHOD`; a colon inside a URL scheme (`s3://`) or a path is not a method."""
    run, colon, method = spec.rpartition(":")
    if colon and run and method and "/" not in method and not run.endswith(":"):
        return run, method
    return spec, None


def load_side(spec: str) -> Side:
    run, method = parse_side(spec)
    records = read_records(run, _COLUMNS)
    if records.num_rows == 0:
        raise InputError(f"{run}: no records found under {run}/records")
    side = Side(run, method, records, read_manifest(run))
    if method is not None and method not in side.methods:
        raise InputError(f"{run}: no records of method '{method}' (it has {', '.join(side.methods)})")
    return side


def _data_key(manifest: dict | None) -> dict | None:
    """What makes two runs' questions and corpora the same: per subset its splits, questions and contexts, and
    whether corpora were pooled or padded with distractors (not the path the data was read from)."""
    data = (manifest or {}).get("data")
    if not data:
        return None
    return {key: data.get(key) for key in ("subsets", "pooled_corpus", "distractors")}


def check_same_data(a: Side, b: Side) -> None:
    key_a, key_b = _data_key(a.manifest), _data_key(b.manifest)
    if key_a is not None and key_b is not None and key_a != key_b:
        raise InputError(f"{a.run} and {b.run} were run on different data ({_describe(key_a)} against "
                         f"{_describe(key_b)}): their questions cannot be paired")  # fmt: skip


def _describe(key: dict) -> str:
    subsets = key.get("subsets") or {}
    return "; ".join(f"{name} {'+'.join(s.get('splits') or [])} {s.get('questions')} questions "
                     f"{s.get('contexts')} contexts" for name, s in subsets.items())  # fmt: skip


def pairs(a: Side, b: Side) -> list[tuple[str, str]]:
    """The (method of A, method of B) pairs to compare."""
    if a.method and b.method:
        return [(a.method, b.method)]
    if a.method or b.method:
        method = a.method or b.method
        other = b if a.method else a
        if method not in other.methods:
            raise InputError(f"{other.run} has no method '{method}': name one ({other.run}:METHOD)")
        return [(method, method)]
    shared = [m for m in a.methods if m in b.methods]
    if not shared:
        raise InputError(f"{a.run} and {b.run} share no method: name one on each side (RUN_DIR:METHOD)")
    return [(m, m) for m in shared]


def compare_runs(spec_a: str, spec_b: str) -> list[Difference]:
    """Every metric of each pair over the questions both sides scored, per subset and over all of them."""
    a, b = load_side(spec_a), load_side(spec_b)
    check_same_data(a, b)
    shared = pc.is_in(a.records.column("id"), b.records.column("id"))
    if not pc.any(shared).as_py():
        raise InputError(f"{a.run} and {b.run} share no question")
    found: list[Difference] = []
    for method_a, method_b in pairs(a, b):
        label = method_a if method_a == method_b else f"{method_a} vs {method_b}"
        found += compare(a.records, method_a, b.records, method_b, METRICS, label)
    if not found:
        raise InputError(f"{a.run} and {b.run} share no question that both scored on any metric")
    return found
