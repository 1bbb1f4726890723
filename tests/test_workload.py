"""The workload counted before a run: prompts and tokens per method and subset, from the real data."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from t2rag.config import load_config
from t2rag.pipeline.plan import plan_work
from t2rag.resources import Resources
from t2rag.workload import measure_workload

METHODS = ["pretrained_only", "oracle", "base", "hyde", "summarization"]


@pytest.fixture(scope="module")
def measured():
    config = load_config(None, {"methods": METHODS, "generator": "qwen2.5-0.5b", "limit": 5})
    resources = Resources(config)
    work = plan_work(config, resources.questions)
    return config, resources, work, measure_workload(config, resources, work, answer_tokens=100)


def _cell(workload, method, subset):
    return next(m for m in workload.methods if (m.method, m.subset) == (method, subset))


def test_counts_follow_the_plan(measured):
    workload = measured[3]
    base = _cell(workload, "base", "FinQA")
    assert base.retrievals == base.dense_queries == 883 and base.answers.prompts == 5
    assert _cell(workload, "hyde", "TAT-DQA").hyde.prompts == 5  # HyDE runs on the generation sample alone
    assert workload.total("answers").prompts == len(METHODS) * 2 * 5
    assert workload.total("answers").output_tokens == len(METHODS) * 2 * 5 * 100
    assert {k: g.prompts for k, g in workload.summaries.items()} == {"FinQA": 299, "TAT-DQA": 274}
    assert workload.passages == {"FinQA/context": 299, "TAT-DQA/context": 274, "FinQA/summary": 299,
                                 "TAT-DQA/summary": 274}  # fmt: skip
    assert workload.query_embeddings() == 883 + 1142 + 10  # each question once, plus HyDE's documents


def test_tokens_are_the_real_prompts_characters_over_the_ratio(measured):
    """Prompts without a context are estimated exactly; the oracle's (one gold context each, estimated at the
    corpus's mean length) within 20% of its real prompts."""
    config, resources, work, workload = measured
    prompts, ratio = resources.prompts, config.estimate.chars_per_token
    checked = 0
    for group in work:
        if group.stages[-1] != "parse_answers":
            continue
        for method in ("pretrained_only", "oracle"):
            rows = group.rows.filter(pc.and_(pc.equal(group.rows.column("method"), method),
                                             pc.equal(group.rows.column("subset"), "FinQA")))  # fmt: skip
            if rows.num_rows == 0:
                continue
            contexts = rows.column("gold_context").to_pylist() if method == "oracle" else [None] * rows.num_rows
            chars = sum(
                sum(len(m["content"]) for m in prompts.answer(q, [c] if c else []))
                for q, c in zip(rows.column("question").to_pylist(), contexts, strict=True)
            )
            estimated = _cell(workload, method, "FinQA").answers.prompt_tokens
            if method == "pretrained_only":
                assert estimated == round(chars / ratio)
            else:
                assert estimated == pytest.approx(chars / ratio, rel=0.2)
            checked += 1
    assert checked == 2


def test_retrieved_prompts_count_each_of_their_k_contexts(measured):
    """Base-RAG's prompts read k contexts, each clipped on its own: the estimate is within 20% of real prompts
    built from k real contexts of the corpus per question (the gold one and the next k - 1 in corpus order)."""
    config, resources, work, workload = measured
    prompts, ratio, k = resources.prompts, config.estimate.chars_per_token, config.retrieval.k
    corpus = resources.corpus("FinQA")
    texts = corpus.texts
    group = next(g for g in work if g.stages[-1] == "parse_answers" and "base" in g.rows.column("method").to_pylist())
    rows = group.rows.filter(pc.and_(pc.equal(group.rows.column("method"), "base"),
                                     pc.equal(group.rows.column("subset"), "FinQA")))  # fmt: skip
    chars = 0
    for question, gold in zip(rows.column("question").to_pylist(), rows.column("context_id").to_pylist(), strict=True):
        first = corpus.positions[gold]
        contexts = [texts[(first + i) % len(texts)] for i in range(k)]
        chars += sum(len(m["content"]) for m in prompts.answer(question, contexts))
    assert rows.num_rows == 5
    assert _cell(workload, "base", "FinQA").answers.prompt_tokens == pytest.approx(chars / ratio, rel=0.2)


def test_prompt_tokens_to_compute_count_each_shared_prefix_once():
    """The oracle over every question of TAT-DQA dev (1,142 over 274 contexts): the estimate of what an engine
    computes with prefix reuse is within 20% of the prefix tree of the real prompts (the system prompt once, each
    gold context once, the rest of every prompt), and without reuse everything is computed."""
    config = load_config(None, {"methods": ["oracle"], "generator": "qwen2.5-0.5b", "data": {"subsets": ["TAT-DQA"]}})
    resources = Resources(config)
    work = plan_work(config, resources.questions)
    answers = measure_workload(config, resources, work, answer_tokens=100).total("answers")
    prompts, corpus = resources.prompts, resources.corpus("TAT-DQA")
    rows = resources.questions.scored()
    seen, computed = set(), 0
    for question, gold in zip(rows.column("question").to_pylist(), rows.column("context_id").to_pylist(), strict=True):
        system, user = (m["content"] for m in prompts.answer(question, [corpus.texts[corpus.positions[gold]]]))
        shared = len(prompts.format_contexts([corpus.texts[corpus.positions[gold]]]))
        computed += len(user) - (shared if gold in seen else 0) + (0 if seen else len(system))
        seen.add(gold)
    ratio = config.estimate.chars_per_token
    assert answers.prompts == rows.num_rows == 1142
    assert answers.to_compute == pytest.approx(computed / ratio, rel=0.2)
    assert answers.to_compute < 0.4 * answers.prompt_tokens

    off = config.model_copy(update={"generator": config.generator.model_copy(update={"prefix_reuse": False})})
    assert (
        measure_workload(off, resources, work, answer_tokens=100).total("answers").to_compute == answers.prompt_tokens
    )
