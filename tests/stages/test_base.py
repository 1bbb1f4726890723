"""Grouping rows by key: one group without a group-by when every row shares the keys, else groups in order of first
appearance; nulls are keys like any other value."""

from __future__ import annotations

import pyarrow as pa
import pytest

from t2rag.stages.base import groups, run_chain


def as_lists(batch: pa.Table, *keys: str) -> list[tuple[tuple, list[int]]]:
    return [(key, rows.tolist()) for key, rows in groups(batch, *keys)]


def test_one_shared_key_is_one_group():
    batch = pa.table({"method": ["bm25"] * 3, "subset": ["FinQA"] * 3, "k": [3, 3, 3]})
    assert as_lists(batch, "method", "subset", "k") == [(("bm25", "FinQA", 3), [0, 1, 2])]
    assert as_lists(batch.slice(0, 0), "method") == []


def test_mixed_keys_group_in_order_of_first_appearance():
    batch = pa.table({"method": ["base", "bm25", "base", "bm25"], "k": [3, 3, 3, 5]})
    assert as_lists(batch, "method", "k") == [(("base", 3), [0, 2]), (("bm25", 3), [1]), (("bm25", 5), [3])]


def test_nulls_are_keys():
    batch = pa.table({"subset": pa.array([None, None], pa.string())})
    assert as_lists(batch, "subset") == [((None,), [0, 1])]
    mixed = pa.table({"subset": pa.array([None, "FinQA", None], pa.string())})
    assert as_lists(mixed, "subset") == [((None,), [0, 2]), (("FinQA",), [1])]


def test_a_stage_given_a_batch_without_a_column_it_reads_fails_naming_both():
    from t2rag.config import load_config
    from t2rag.methods import PROMPTING
    from t2rag.resources import Resources
    from t2rag.stages import built

    steps = built(
        Resources(load_config(None, {"methods": ["pretrained_only"], "generator": "smollm2-135m"})), PROMPTING
    )
    rows = pa.table({"method": ["pretrained_only"], "subset": ["FinQA"], "question": ["What was the revenue?"]})
    assert run_chain(steps, rows).column("messages_json")[0].as_py()
    with pytest.raises(ValueError, match=r"^stage answer_prompts reads \['question'\], which the batch lacks"):
        run_chain(steps, rows.drop_columns(["question"]))


def test_a_rows_corpus_column_names_the_corpus_it_searches():
    """Served rows name their corpus (`corpus`: a subset's or `pooled`); run rows name it by their `subset`. A row
    naming both searches its `corpus`; one naming neither fails saying so."""
    from t2rag.config import load_config
    from t2rag.resources import Resources
    from t2rag.stages import built

    resources = Resources(load_config(None, {"methods": ["bm25"], "generator": "smollm2-135m"}))
    (retrieve,) = [stage for _, stage in built(resources, ("retrieve",))]
    tat = resources.questions.subset("TAT-DQA").scored().slice(0, 4)
    rows = {"method": ["bm25"] * 4, "question": tat.column("question").to_pylist(), "k": pa.array([3] * 4, pa.int64())}
    by_subset = retrieve(pa.table({**rows, "subset": ["TAT-DQA"] * 4})).column("context_ids").to_pylist()
    by_corpus = retrieve(pa.table({**rows, "corpus": ["TAT-DQA"] * 4})).column("context_ids").to_pylist()
    assert by_corpus == by_subset
    pooled = retrieve(pa.table({**rows, "subset": ["FinQA"] * 4, "corpus": ["pooled"] * 4}))
    whole = resources.corpus("pooled")
    assert resources.corpus("FinQA").name == "FinQA" and len(whole) > len(resources.corpus("TAT-DQA"))
    found = {whole.subsets[whole.positions[c]] for ids in pooled.column("context_ids").to_pylist() for c in ids}
    assert found == {"FinQA", "TAT-DQA"}  # the pooled corpus, not the FinQA one that the rows' subset names
    with pytest.raises(ValueError, match="`corpus` or `subset`"):
        retrieve(pa.table(rows))
