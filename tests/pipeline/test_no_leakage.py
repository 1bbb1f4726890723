"""The question side sees only the question's text: a question's ranking does not change when its own row's
metadata (which describes its gold context) is altered while the corpus stays the same."""

from __future__ import annotations

import pyarrow as pa

from t2rag.config import load_config
from t2rag.data import load_questions
from t2rag.pipeline.local import LocalRunner
from t2rag.resources import Resources
from t2rag.stages.work import work_left

METADATA = ("company_name", "company_symbol", "report_year", "company_sector")


def test_rankings_ignore_the_question_rows_metadata(tmp_path) -> None:
    questions = load_questions(None, ["FinQA"])
    config = load_config(
        None,
        {
            "methods": ["bm25_numeric", "bm25_meta", "bm25_page", "bm25_focus", "hybrid_meta"],
            "retrieval_only": True,
            "data": {"subsets": ["FinQA"]},
            "retrieval": {"embedder": {"model": "hashing"}, "index_uri": str(tmp_path)},
            "out": str(tmp_path / "run"),
        },
    )
    engine = LocalRunner(config, Resources(config, questions=questions))  # the corpus comes from these rows
    groups = work_left(config, questions)

    def ranked(metadata) -> dict[tuple[str, str], list[str]]:
        """(method, id) -> ranked context ids, with these metadata columns on every question row."""
        out = {}
        for group in groups:
            rows = group.rows
            for name, values in metadata(rows).items():
                rows = rows.append_column(name, values)
            done = engine.apply(group.stages, rows)
            keys = zip(done.column("method").to_pylist(), done.column("id").to_pylist(), strict=True)
            out.update(zip(keys, done.column("context_ids").to_pylist(), strict=True))
        return out

    truthful = ranked(lambda rows: {n: questions.take_ids(rows.column("id").to_pylist()).column(n) for n in METADATA})
    altered = ranked(
        lambda rows: {
            "company_name": pa.array(["Apple Inc."] * rows.num_rows),
            "company_symbol": pa.array(["AAPL"] * rows.num_rows),
            "report_year": pa.array(["1999"] * rows.num_rows),
            "company_sector": pa.array(["Energy"] * rows.num_rows),
        }
    )
    assert len(truthful) == 5 * questions.scored().num_rows
    assert altered == truthful == ranked(lambda rows: {})

    # The prior and the page evidence are in use (so the comparison above could fail): each changes rankings.
    ids = questions.scored().column("id").to_pylist()
    changed = sum(truthful["bm25_meta", q][0] != truthful["bm25_numeric", q][0] for q in ids)
    assert changed > 20
    assert sum(truthful["bm25_page", q][0] != truthful["bm25_meta", q][0] for q in ids) > 20
    assert sum(truthful["bm25_focus", q][:3] != truthful["bm25_page", q][:3] for q in ids) > 20
