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


def test_a_contexts_report_is_its_company_and_report_year():
    """`Corpus.reports`: the pages of one annual report share a key, from the corpus side's metadata; a context with
    none is its own report."""
    from t2rag.data import build_corpora, load_questions
    from t2rag.data.corpus import Corpus

    corpus = build_corpora(load_questions(None))["TAT-DQA"]
    names, years = corpus.metadata["company_name"], corpus.metadata["report_year"]
    assert corpus.reports == tuple(f"{n}|{y}" for n, y in zip(names, years, strict=True))
    assert len(set(corpus.reports)) < len(corpus) / 2  # TAT-DQA's dev split holds several pages of most reports
    bare = Corpus("bare", ("a", "b"), ("x", "x"), ("t", "u"), metadata={"company_name": ("Acme", None)})
    assert bare.reports == ("a", "b")
