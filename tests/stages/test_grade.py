"""The generator's grades of what was retrieved (Self-RAG, Corrective RAG), on real rankings of the bundled sample."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from t2rag.config import load_config
from t2rag.methods import METHODS, PROMPTING
from t2rag.resources import Resources
from t2rag.stages import built
from t2rag.stages.base import run_chain, with_columns
from t2rag.stages.grade import parse_grade
from tests.conftest import HASHING

K = 3


@pytest.fixture(scope="module")
def ranked():
    """Six FinQA questions ranked by `base` (dense, on the hashing embedder's vectors: the grading is tested, not the
    ranking), for self_rag and crag alike; the resources that ranked them."""
    config = load_config(None, {"methods": ["self_rag", "crag"], "generator": "smollm2-135m",
                                "data": {"subsets": ["FinQA"]},
                                "retrieval": HASHING})  # fmt: skip
    resources = Resources(config)
    questions = resources.questions.subset("FinQA").scored().slice(0, 6)
    rows = pa.table({
        "id": questions.column("id"), "subset": questions.column("subset"), "question": questions.column("question"),
        "context_id": questions.column("context_id"),
        "method": pa.array(["self_rag"] * 3 + ["crag"] * 3),
    })  # fmt: skip
    return resources, run_chain(built(resources, ("embed_queries", "retrieve", "grade_prompts")), rows)


def _graded(resources, ranked, grades):
    generated = with_columns(ranked, {"raw_output": pa.array(grades, pa.string())})
    return run_chain(built(resources, ("grade_contexts", "corrective_retrieve")), generated)


@pytest.mark.parametrize(
    ("text", "graded", "expected"),
    [
        ('{"relevant": [3, 1]}', 3, [3, 1]),
        ('```json\n{"relevant": [2, 2, 7, 0, true]}\n```', 3, [2]),
        ('{"relevant": []}', 3, []),
        ("the second one", 3, None),
        ('{"relevant": [1,', 3, None),
    ],
)
def test_a_grade_is_read_as_the_excerpts_judged_relevant(text, graded, expected):
    assert parse_grade(text, graded) == expected


def test_the_grade_prompt_shows_the_top_k_excerpts_and_asks_for_json(ranked):
    resources, batch = ranked
    messages = json.loads(batch.column("messages_json")[0].as_py())
    params = json.loads(batch.column("params_json")[0].as_py())
    top = resources.corpus("FinQA").texts_of(batch.column("context_ids")[0].as_py()[:K])
    text = messages[-1]["content"]
    assert all(f"### Excerpt {i}" in text for i in (1, 2, 3)) and "### Excerpt 4" not in text
    assert all(t[:200] in text for t in top) and batch.column("question")[0].as_py() in text
    assert params["json_schema"]["required"] == ["relevant"] and params["max_tokens"] == 48


def test_relevant_contexts_come_first_and_are_what_the_generator_reads(ranked):
    resources, batch = ranked
    before = batch.column("context_ids").to_pylist()
    grades = ['{"relevant": [3]}', '{"relevant": []}', "no grade", '{"relevant": [2, 1]}', '{"relevant": [3]}', "x"]
    out = _graded(resources, batch, grades)
    after, readers = out.column("context_ids").to_pylist(), out.column("reader_ids").to_pylist()
    assert out.column("relevant").to_pylist() == [1, 0, None, 2, 1, None]
    assert after[0][0] == before[0][2] and sorted(after[0]) == sorted(before[0]) and readers[0] == [before[0][2]]
    assert readers[1] == [] and after[1] == before[1]  # self_rag, none relevant: reads nothing
    assert readers[2] is None and after[2] == before[2]  # no grade: reads the top k as ranked
    assert after[3][:2] == [before[3][1], before[3][0]] and readers[3] == after[3][:2]
    gold = out.column("context_id").to_pylist()
    ranks = out.column("gold_rank").to_pylist()
    assert all(r == (a.index(g) + 1 if g in a else 0) for r, a, g in zip(ranks, after, gold, strict=True))
    assert not {"raw_output", "messages_json"} & set(out.column_names)
    # read_contexts reads what the grade chose
    texts = run_chain(built(resources, PROMPTING[:1]), out).column("reader_texts").to_pylist()
    assert texts[1] == [] and len(texts[0]) == 1 and len(texts[2]) == K


def test_crag_ranks_again_with_its_fallback_when_nothing_is_relevant(ranked):
    resources, batch = ranked
    grades = ['{"relevant": []}'] * 6
    out = _graded(resources, batch, grades)
    fallback = METHODS["crag"].fallback
    assert fallback == "bm25_focus" and METHODS[fallback].stages == ("retrieve",)
    again = run_chain(built(resources, ("retrieve",)), batch.select(["id", "subset", "question", "context_id"])
                      .append_column("method", pa.array([fallback] * 6)))  # fmt: skip
    crag = slice(3, 6)
    assert out.column("context_ids").to_pylist()[crag] == again.column("context_ids").to_pylist()[crag]
    assert out.column("gold_rank").to_pylist()[crag] == again.column("gold_rank").to_pylist()[crag]
    assert out.column("reader_ids").to_pylist()[crag] == [None] * 3  # reads the new top k
    assert out.column("context_ids").to_pylist()[:3] == batch.column("context_ids").to_pylist()[:3]  # self_rag
