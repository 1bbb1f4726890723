"""The authors' remaining methods (hyde_reranker, self_rag, crag) on real dev rows (`mini_data`): a ranking and an
answer for every sampled question, their extra generations planned, the excerpts a grade judged relevant first, and
a rerun that computes nothing again.

They answer and grade through the scripted OpenAI-compatible server (tests/scripted_server.py), whose grades are
all, the first or none of the excerpts, so both of a grade's outcomes occur; what is tested is the methods' stages,
not a model's text. SmolLM2 generates for these methods, in process and through llama.cpp's server, in
test_methods_end_to_end.py."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from t2rag.config import load_config
from t2rag.estimate.workload import measure_workload
from t2rag.pipeline.local import run_local
from t2rag.resources import Resources
from t2rag.run_folder.files import read_records
from t2rag.stages.work import work_left
from tests.scripted_server import scripted_for

pytestmark = [pytest.mark.slow]
METHODS = ["hyde_reranker", "self_rag", "crag"]
SAMPLE = 3  # questions per subset


@pytest.fixture(scope="module")
def scripted(mini_data):
    with scripted_for(mini_data) as generator:
        yield generator


def test_the_authors_remaining_methods_rank_and_answer_every_sampled_question(
    scripted, mini_data, minilm_reranker, tmp_path
):
    config = load_config(None, {
        "data": {"source": mini_data}, "methods": METHODS, "limit": SAMPLE, "seed": 5, "out": str(tmp_path / "run"),
        "generator": {**scripted, "sampling": {"max_tokens": 32}},
        "retrieval": {"reranker": minilm_reranker},
        "prompts": {"max_context_chars": 400, "hyde_max_tokens": 32, "grade_max_tokens": 16},
    })  # fmt: skip
    resources = Resources(config)
    work = work_left(config, resources.questions)
    planned = measure_workload(config, resources, work, answer_tokens=32)
    for cell in planned.methods:  # one HyDE document or one grade per sampled question, before its answer
        assert cell.pre_answer.prompts == cell.answers.prompts == SAMPLE, cell.method
        assert cell.pre_answer.output_tokens == SAMPLE * (32 if cell.method == "hyde_reranker" else 16)

    result = run_local(config)
    records = read_records(config.out)
    subsets = resources.questions.subsets
    for method in METHODS:
        rows = records.filter(pc.equal(records.column("method"), method)).to_pylist()
        assert len(rows) == SAMPLE * len(subsets), method  # these methods rank the generation sample alone
        assert all(r["context_ids"] and r["gold_rank"] is not None for r in rows), method
        assert all(r["raw_output"] and r["generation_error"] is None for r in rows), method
        assert result["methods"][method]["weighted"]["generated"] == SAMPLE * len(subsets)
    graded = records.filter(pc.is_in(records.column("method"), pa.array(["self_rag", "crag"]))).to_pylist()
    assert {bool(r["reader_ids"]) for r in graded} == {True, False}  # some excerpts judged relevant, and none
    for r in graded:  # the excerpts judged relevant lead the ranking
        assert not r["reader_ids"] or r["context_ids"][: len(r["reader_ids"])] == r["reader_ids"], r
    reranked = records.filter(pc.equal(records.column("method"), "hyde_reranker")).to_pylist()
    assert all(len(r["context_ids"]) == 3 * 3 for r in reranked)  # its pool of 3k, reordered by the cross-encoder

    again = run_local(config)  # resumable: every (method, question) has its record
    assert again["methods"] == result["methods"] and read_records(config.out).num_rows == records.num_rows
