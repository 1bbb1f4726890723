"""Planning, the same for every runner: which (method, question) pairs still need work, and through which stages.

A run's work is one row per (method, question): every scored question for a retrieving method, the seeded
generation sample for methods that only answer or that generate before they retrieve (HyDE). A row's stages are its
method's chain, with the answering stages only for the generation sample. Rows whose (method, id) already has a
record are left out, so a run resumes on either runner from whatever either wrote.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.data import QuestionSet
from t2rag.methods import ANSWER_TAIL, get_method
from t2rag.stages import require_stages

#: The columns of a planned row (see t2rag.stages for what each stage adds).
INPUT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("subset", pa.string()),
        pa.field("method", pa.string()),
        pa.field("question", pa.string()),
        pa.field("context_id", pa.string()),
        pa.field("gold_context", pa.string()),
        pa.field("reference", pa.float64()),
        pa.field("original_answer", pa.string()),
        pa.field("program", pa.string()),
    ]
)


@dataclass(frozen=True)
class WorkGroup:
    """Rows that go through the same stages, ordered by question and then by method (so a block embeds each
    question once for all the methods that share it); with `generator.prefix_reuse`, generating rows are first
    ordered by subset and gold context."""

    stages: tuple[str, ...]
    rows: pa.Table

    @property
    def generates(self) -> bool:
        """Whether its rows go through a generator (answers or HyDE queries): slow rows, streamed in small blocks."""
        return "generate" in self.stages


def split_chain(stages: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """A group's stages as (its own part, the part it can share with other groups, whether it answers): its own
    part runs up to its last generation before the answering tail (HyDE's query); every answering group then ends
    with the same `ANSWER_TAIL`, which the runners run once for the rows of every method together."""
    answers = stages[-len(ANSWER_TAIL) :] == ANSWER_TAIL
    chain = stages[: -len(ANSWER_TAIL)] if answers else stages
    generations = [i for i, name in enumerate(chain) if name == "generate"]
    cut = generations[-1] + 1 if generations else 0
    return chain[:cut], chain[cut:], answers


def sample_questions(table: pa.Table, n: int | None, seed: int) -> pa.Table:
    """A seeded sample of n rows per subset, kept in data order; the same seed always picks the same ids."""
    if n is None:
        return table
    parts = []
    for subset in dict.fromkeys(table.column("subset").to_pylist()):
        part = table.filter(pc.equal(table.column("subset"), subset))
        if part.num_rows <= n:
            parts.append(part)
            continue
        rng = np.random.default_rng([seed, zlib.crc32(subset.encode())])
        # Rank ids by a seeded permutation of their sorted order, so the sample does not depend on file order.
        ids = np.asarray(part.column("id").to_pylist(), dtype=object)
        order = np.argsort(ids, kind="stable")
        chosen = np.sort(order[rng.permutation(len(ids))[:n]])
        parts.append(part.take(pa.array(chosen)))
    return pa.concat_tables(parts) if parts else table.slice(0, 0)


def _is_in(ids: pa.ChunkedArray, values: list[str]) -> np.ndarray:
    return pc.is_in(ids, pa.array(values, pa.string())).to_numpy(zero_copy_only=False)


def work_left(config: RunConfig, questions: QuestionSet, done: set[tuple[str, str]] | None = None) -> list[WorkGroup]:
    """The rows still to compute, grouped by their stages."""
    done = done or set()
    scored = questions.scored()
    scored = scored.append_column("_q", pa.array(np.arange(scored.num_rows)))
    ids = scored.column("id")
    sampled = _is_in(ids, sample_questions(scored, config.limit, config.seed).column("id").to_pylist())
    done_ids: dict[str, list[str]] = {}
    for method_name, qid in done:
        done_ids.setdefault(method_name, []).append(qid)
    parts: dict[tuple[str, ...], list[pa.Table]] = {}
    for position, name in enumerate(config.methods):
        method = get_method(name)
        require_stages(name, method.chain(config.generates(name)))
        generate = config.generates(name)
        if not method.retrieves and not generate:
            continue
        # Methods that only answer, or generate before they retrieve (HyDE), run on the generation sample alone.
        on_sample = not method.retrieves or "generate" in method.stages
        finished = _is_in(ids, done_ids.get(name, []))
        keep = (sampled if on_sample else np.ones_like(sampled)) & ~finished
        for answering in (False, True) if generate else (False,):
            mask = keep & (sampled if answering else ~sampled) if generate else keep
            if not mask.any():
                continue
            rows = scored.filter(pa.array(mask))
            table = pa.table(
                {
                    "id": rows.column("id"),
                    "subset": rows.column("subset"),
                    "method": pa.array([name] * rows.num_rows, pa.string()),
                    "question": rows.column("question"),
                    "context_id": rows.column("context_id"),
                    "gold_context": rows.column("context") if answering else pa.nulls(rows.num_rows, pa.string()),
                    "reference": rows.column("answer_value"),
                    "original_answer": rows.column("original_answer"),
                    "program": rows.column("program"),
                    "_q": rows.column("_q"),
                    "_m": pa.array([position] * rows.num_rows, pa.int64()),
                }
            )
            parts.setdefault(method.chain(generate and answering), []).append(table)
    groups = []
    by_prefix = config.generator is not None and config.generator.prefix_reuse
    for stages, tables in parts.items():
        order = [("_q", "ascending"), ("_m", "ascending")]
        if by_prefix and "generate" in stages:
            # The questions of one context next to each other: their prompts tend to share that context as prefix.
            # Only the order changes; no row sees another's data.
            order = [("subset", "ascending"), ("context_id", "ascending"), *order]
        rows = pa.concat_tables(tables).sort_by(order)
        groups.append(WorkGroup(stages, rows.drop_columns(["_q", "_m"]).cast(INPUT_SCHEMA)))
    return groups
