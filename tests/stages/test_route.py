"""Routed methods on real dev rows: each router's ranking and scores against counts made here, the corpus each
routed question searches, the LLM router through the scripted server on a seeded sample, and a router over one
subset refused."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from t2rag.cli import main
from t2rag.config import load_config
from t2rag.data import build_corpus
from t2rag.pipeline.local import run_local
from t2rag.retrieval import QueryBlock, build_retriever
from t2rag.routing.descriptions import DESCRIPTIONS
from t2rag.run_folder.files import read_records
from tests.conftest import HASHING
from tests.scripted_server import scripted_for

METHODS = ["bm25", "bm25@pooled", "bm25@oracle", "bm25@semantic"]


@pytest.fixture(scope="module")
def routed_run(tiny_data, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("routed") / "run")
    with scripted_for(tiny_data) as generator:
        config = load_config(None, {"data": {"source": tiny_data}, "methods": [*METHODS, "bm25@llm"],
                                    "retrieval_only_methods": METHODS, "generator": generator, "limit": 3,
                                    "retrieval": HASHING, "out": out})  # fmt: skip
        run_local(config)
    return out


def _by(records, method):
    part = records.filter(pc.equal(records.column("method"), method))
    return {(r["subset"], r["id"]): r for r in part.to_pylist()}


def test_each_router_ranks_scores_and_searches_as_counted_here(routed_run, tiny_data):
    from t2rag.data import load_questions
    from t2rag.retrieval.config import EmbedderConfig
    from t2rag.retrieval.dense.hashing_embedder import HashingEmbedder

    questions = load_questions(tiny_data)
    records = read_records(routed_run)
    plain, pooled, oracle, semantic = (_by(records, m) for m in METHODS)
    assert plain.keys() == pooled.keys() == oracle.keys() == semantic.keys()
    loaded = ["FinQA", "TAT-DQA"]
    # The oracle router searches each question's own subset: bm25's ranking, routing right every time.
    for key, r in oracle.items():
        assert r["context_ids"] == plain[key]["context_ids"] and r["corpus"] == key[0]
        assert (r["routing_acc"], r["routing_ndcg3"], r["routed_subsets"][0]) == (True, 1.0, key[0])
    # Pooled, unrouted: BM25 over every subset's contexts together, no ranking of subsets.
    corpus = build_corpus(questions, None)
    retriever = build_retriever("bm25", load_config(None, {}).retrieval)
    retriever.index(corpus)
    keys = list(pooled)
    table = questions.table
    keyed = zip(table.column("subset").to_pylist(), table.column("id").to_pylist(), strict=True)
    text = dict(zip(keyed, table.column("question").to_pylist(), strict=True))
    hits = retriever.search(QueryBlock([text[k] for k in keys]), 3, depth=10)
    for key, ids in zip(keys, hits.context_ids(corpus), strict=True):
        assert pooled[key]["context_ids"][:3] == ids[:3] and pooled[key]["corpus"] == "pooled"
        assert pooled[key]["routing_acc"] is None and pooled[key]["routed_subsets"] is None
    # Semantic: the question's hashing vector against each description's, by cosine, computed here.
    embedder = HashingEmbedder(EmbedderConfig(**HASHING["embedder"]))
    d = embedder.embed_passages([DESCRIPTIONS[s] for s in loaded])
    q = embedder.embed_queries([text[k] for k in keys])
    cos = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (d / np.linalg.norm(d, axis=1, keepdims=True)).T
    for key, row in zip(keys, cos, strict=True):
        top = loaded[int(np.argmax(row))]
        r = semantic[key]
        assert r["routed_subsets"][0] == top and r["corpus"] == top
        assert r["routing_acc"] is (top == key[0])
        assert r["routing_ndcg3"] == pytest.approx(1.0 if top == key[0] else 1 / np.log2(3))
        if r["corpus"] == key[0]:  # searched its own subset: bm25's ranking there
            assert r["context_ids"] == plain[key]["context_ids"]
        else:  # another subset's corpus holds no gold
            assert r["gold_rank"] == 0


def test_the_llm_router_runs_on_the_seeded_sample_through_the_generator(routed_run):
    records = read_records(routed_run)
    llm = _by(records, "bm25@llm")
    assert len(llm) == 6  # 3 seeded questions per subset, as answers are
    for (subset, _), r in llm.items():
        assert sorted(r["routed_subsets"]) == ["FinQA", "TAT-DQA"] and r["corpus"] == r["routed_subsets"][0]
        assert r["routing_acc"] is (r["routed_subsets"][0] == subset)
        assert r["raw_output"] is not None and r["number_match"] is not None  # answered after routing


def test_the_scorecards_count_the_routing_columns(routed_run, capsys):
    import json

    assert main(["score", "--predictions", routed_run, "--json"]) == 0
    cards = json.loads(capsys.readouterr().out)["methods"]
    records = read_records(routed_run)
    semantic = [r for r in _by(records, "bm25@semantic").values()]
    weighted = cards["bm25@semantic"]["weighted"]
    assert weighted["routed"] == len(semantic)
    assert weighted["routing_acc"] == pytest.approx(100 * sum(r["routing_acc"] for r in semantic) / len(semantic))
    assert weighted["routing_ndcg3"] == pytest.approx(100 * np.mean([r["routing_ndcg3"] for r in semantic]), abs=1e-3)
    assert (
        "routing_acc" not in cards["bm25@pooled"]["weighted"] and cards["bm25@oracle"]["weighted"]["routing_acc"] == 100
    )


def test_routing_over_one_subset_is_refused_in_one_line(tiny_data, tmp_path, capsys):
    argv = ["eval", "--data", tiny_data, "--subsets", "FinQA", "--methods", "bm25@oracle", "--retrieval-only",
            "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "routing needs two or more subsets loaded" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_an_unknown_router_is_refused_naming_the_routers():
    with pytest.raises(Exception, match=r"unknown router 'magic'.*pooled, oracle, semantic, llm"):
        load_config(None, {"methods": ["bm25@magic"]})
    with pytest.raises(Exception, match="'oracle' does not retrieve"):
        load_config(None, {"methods": ["oracle@semantic"]})


def test_the_report_sets_routed_search_beside_the_own_subset_and_pooled_search(routed_run):
    import csv
    from pathlib import Path

    from t2rag.results.report import write_report
    from t2rag.results.significance import compare

    table = Path(write_report(routed_run)["routing"]).with_suffix(".csv")
    rows = {r["method"]: r for r in csv.DictReader(table.open())}
    assert [rows[m]["search"] for m in ("bm25", "bm25@pooled", "bm25@oracle", "bm25@semantic", "bm25@llm")] == [
        "own subset", "pooled, unrouted", "oracle router", "semantic router", "llm router"]  # fmt: skip
    records = read_records(routed_run)
    for method in ("bm25@pooled", "bm25@llm"):  # paired over the questions both ranked (llm: the sample only)
        (weighted,) = [d for d in compare(records, method, records, "bm25", ["mrr@3"]) if d.subset == "weighted"]
        assert float(rows[method]["MRR@3 vs own subset (same questions)"]) == round(weighted.diff, 2)
    assert float(rows["bm25@oracle"]["routing acc"]) == 100.0
