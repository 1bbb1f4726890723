"""Corpora that grow: distractors from a second source in the same layout, synthetic timing-only contexts, and
the order-keeping extension both use."""

from __future__ import annotations

import numpy as np

from t2rag.config import load_config
from t2rag.data import build_corpus
from t2rag.data.distractors import SYNTHETIC_CHUNK, SYNTHETIC_PREFIX, extend, load_distractors, synthetic_contexts
from t2rag.pipeline.local import run_local
from t2rag.resources import Resources
from tests.conftest import real_table, write_layout


def test_extend_keeps_the_corpus_first_and_skips_what_it_holds(sample):
    finqa, tat = build_corpus(sample, "FinQA"), build_corpus(sample, "TAT-DQA")
    grown = extend(finqa, tat.select([0, 1, 2]))
    assert grown.context_ids[: len(finqa)] == finqa.context_ids and len(grown) == len(finqa) + 3
    assert len(extend(finqa, finqa)) == len(finqa)  # nothing it already holds is added twice
    seeded = extend(finqa, tat, count=10, seed=4)
    assert seeded.context_ids == extend(finqa, tat, count=10, seed=4).context_ids
    assert seeded.context_ids[len(finqa) :] != extend(finqa, tat, count=10).context_ids[len(finqa) :]


def test_synthetic_contexts_are_seeded_and_labelled():
    a, b = synthetic_contexts(50, seed=1), synthetic_contexts(50, seed=1)
    assert a.texts == b.texts and a.texts != synthetic_contexts(50, seed=2).texts
    assert all(cid.startswith(SYNTHETIC_PREFIX) for cid in a.context_ids)
    lengths = [len(t.split()) for t in a.texts]
    assert 50 < np.mean(lengths) < 2000  # real contexts' lengths, resampled


def test_any_range_of_synthetic_contexts_is_made_alike():
    """A shard of a large synthetic corpus is made in its own task: its contexts are those of the whole, by range."""
    whole = synthetic_contexts(SYNTHETIC_CHUNK + 30, seed=3)
    parts = [
        synthetic_contexts(b - a, seed=3, first=a)
        for a, b in ((0, 7), (7, SYNTHETIC_CHUNK + 4), (SYNTHETIC_CHUNK + 4, SYNTHETIC_CHUNK + 30))
    ]
    assert sum((p.texts for p in parts), ()) == whole.texts
    assert sum((p.context_ids for p in parts), ()) == whole.context_ids


def test_a_second_parquet_source_extends_every_corpus(sample, tmp_path):
    """FinQA's questions against FinQA's contexts plus every TAT-DQA context (from another source): the same
    questions are asked, and the gold context can only lose rank."""
    source = str(write_layout(tmp_path / "other", {"TAT-DQA": real_table("TAT-DQA")}, split="dev"))
    assert len(load_distractors(source)) == len(build_corpus(sample, "TAT-DQA"))
    base = {"data": {"subsets": ["FinQA"]}, "methods": ["bm25"], "retrieval_only": True}
    grown_config = load_config(
        None, {**base, "data": {"subsets": ["FinQA"], "distractors": source}, "out": str(tmp_path / "g")}
    )
    corpus = Resources(grown_config).corpus("FinQA")
    assert len(corpus) == len(build_corpus(sample, "FinQA")) + len(build_corpus(sample, "TAT-DQA"))
    grown = run_local(grown_config)["methods"]["bm25"]["subsets"]["FinQA"]
    plain = run_local(load_config(None, {**base, "out": str(tmp_path / "p")}))["methods"]["bm25"]["subsets"]["FinQA"]
    assert grown["questions"] == plain["questions"]
    assert grown["mrr@3"] <= plain["mrr@3"] and grown["recall@5"] <= plain["recall@5"]


def test_a_corpus_only_source_loads_as_contexts_without_a_warning(tmp_path, caplog, capsys):
    """A split's contexts without their questions (question and answers empty, as the test split's contexts are
    shipped): no "excluded from scoring" warning, `t2rag data stats` shows contexts and no question, and as
    distractors they extend every corpus."""
    import logging

    import pyarrow as pa

    from t2rag.cli import main
    from t2rag.data import build_corpora, load_questions, subset_stats
    from t2rag.data.distractors import extend, load_distractors
    from tests.conftest import real_table, write_layout

    tables = {}
    for subset in ("FinQA", "TAT-DQA"):
        table = real_table(subset).slice(0, 40)
        blank = pa.array([""] * table.num_rows)
        for name in ("question", "program_answer", "original_answer"):
            table = table.set_column(table.column_names.index(name), name, blank)
        table = table.set_column(table.column_names.index("id"), "id",
                                 pa.array([f"{subset}-context-{i}" for i in range(table.num_rows)]))  # fmt: skip
        tables[subset] = table
    root = str(write_layout(tmp_path / "contexts", tables, split="test"))
    with caplog.at_level(logging.INFO, logger="t2rag.data.load"):
        loaded = load_questions(root)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "contexts without a question" in caplog.text
    stats = subset_stats(loaded)
    expected = {s: len(set(real_table(s).slice(0, 40).column("context_id").to_pylist())) for s in tables}
    assert {s: (v["questions"], v["contexts"], v["excluded"]) for s, v in stats.items()} == {
        s: (0, n, []) for s, n in expected.items()}  # fmt: skip
    assert loaded.scored().num_rows == 0
    assert main(["data", "stats", "--data", root]) == 0
    assert "a corpus-only source" in capsys.readouterr().out
    sample = build_corpora(load_questions(None))["FinQA"]
    extended = extend(sample, load_distractors(root))  # FinQA's own are not added twice; TAT-DQA's are new
    assert len(extended) == len(sample) + expected["TAT-DQA"]
