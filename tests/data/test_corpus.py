"""Corpora of unique contexts built from the real sample."""

from __future__ import annotations

from t2rag.data import build_corpora, build_corpus


def test_per_subset_corpora(sample):
    corpora = build_corpora(sample)
    assert {k: len(v) for k, v in corpora.items()} == {"FinQA": 299, "TAT-DQA": 274}
    fin = corpora["FinQA"]
    assert len(set(fin.context_ids)) == len(fin)
    assert set(fin.subsets) == {"FinQA"}
    # Order is first appearance: the first question's context comes first.
    assert fin.context_ids[0] == sample.subset("FinQA").table.column("context_id")[0].as_py()


def test_pooled_corpus(sample):
    pooled = build_corpora(sample, pooled=True)
    assert pooled["FinQA"] is pooled["TAT-DQA"]
    assert len(pooled["FinQA"]) == 299 + 274


def test_fingerprint_is_stable_and_content_sensitive(sample):
    a = build_corpus(sample, "FinQA")
    b = build_corpus(sample, "FinQA")
    assert a.fingerprint == b.fingerprint
    changed = a.with_texts([t + " " for t in a.texts])
    assert changed.fingerprint != a.fingerprint
    assert a.select([1, 0]).fingerprint != a.select([0, 1]).fingerprint


def test_to_arrow_round_trip(sample):
    corpus = build_corpus(sample, "TAT-DQA")
    table = corpus.to_arrow()
    assert table.num_rows == 274
    assert table.column("context_id").to_pylist() == list(corpus.context_ids)
