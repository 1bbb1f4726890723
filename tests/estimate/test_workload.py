"""The workload counted before a run: prompts and tokens per method and subset, from the real data."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from t2rag.config import load_config
from t2rag.estimate.workload import _common_prefix, known_answer_prompts, measure_workload
from t2rag.prompts import STAND_IN
from t2rag.resources import Resources
from t2rag.stages.work import work_left

METHODS = ["pretrained_only", "oracle", "base", "hyde", "summarization"]


@pytest.fixture  # per test: mutation testing (`make mutation`) maps each test to the code it runs
def measured():
    config = load_config(None, {"methods": METHODS, "generator": "qwen2.5-0.5b", "limit": 5})
    resources = Resources(config)
    work = work_left(config, resources.questions)
    return config, resources, work, measure_workload(config, resources, work, answer_tokens=100)


def _cell(workload, method, subset):
    return next(m for m in workload.methods if (m.method, m.subset) == (method, subset))


def test_counts_follow_the_plan(measured):
    workload = measured[3]
    base = _cell(workload, "base", "FinQA")
    assert base.retrievals == base.dense_queries == 883 and base.answers.prompts == 5
    assert _cell(workload, "hyde", "TAT-DQA").pre_answer.prompts == 5  # HyDE runs on the generation sample alone
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
    work = work_left(config, resources.questions)
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


def _rows(work, method: str, subset: str):
    for group in work:
        rows = group.rows.filter(pc.and_(pc.equal(group.rows.column("method"), method),
                                         pc.equal(group.rows.column("subset"), subset)))  # fmt: skip
        if rows.num_rows and group.stages[-1] == "parse_answers":
            return rows
    raise AssertionError(f"no answered rows of {method} on {subset}")


def test_hyde_documents_are_counted_from_their_real_prompts(measured):
    config, resources, work, workload = measured
    prompts, ratio = resources.prompts, config.estimate.chars_per_token
    questions = _rows(work, "hyde", "FinQA").column("question").to_pylist()
    chars = sum(sum(len(m["content"]) for m in prompts.hyde(q)) for q in questions)
    hyde = _cell(workload, "hyde", "FinQA").pre_answer
    assert (hyde.prompts, hyde.prompt_tokens) == (5, round(chars / ratio))
    assert hyde.output_tokens == 5 * prompts.config.hyde_max_tokens


def test_summarization_reads_k_summaries_and_summaries_read_each_context(measured):
    """Its answer prompts hold k summaries of at most `summary_max_tokens` each (what a summary may be); the
    summaries' prompts are the summarize prompt over each real context, each writing `summary_max_tokens`."""
    config, resources, work, workload = measured
    prompts, ratio, k = resources.prompts, config.estimate.chars_per_token, config.retrieval.k
    summary = "s" * round(prompts.config.summary_max_tokens * ratio)
    questions = _rows(work, "summarization", "FinQA").column("question").to_pylist()
    chars = sum(sum(len(m["content"]) for m in prompts.answer(q, [summary] * k)) for q in questions)
    answers = _cell(workload, "summarization", "FinQA").answers
    assert answers.prompt_tokens == round(chars / ratio) and answers.output_tokens == 5 * 100
    corpus = resources.corpus("FinQA")
    chars = sum(sum(len(m["content"]) for m in prompts.summarize(t)) for t in corpus.texts)
    summaries = workload.summaries["FinQA"]
    assert summaries.prompt_tokens == pytest.approx(chars / ratio, rel=0.01)
    assert summaries.output_tokens == len(corpus) * prompts.config.summary_max_tokens


def test_contexts_are_counted_as_clipped_by_max_context_chars():
    """Every FinQA context is longer than 300 characters: cut, each counts exactly 300 and the cut's marker in the
    oracle's prompts (made by the stages) and in Base-RAG's (estimated); the passages a dense method embeds are
    whole."""
    config = load_config(None, {"methods": ["oracle", "base"], "generator": "qwen2.5-0.5b", "limit": 5,
                                "data": {"subsets": ["FinQA"]}, "prompts": {"max_context_chars": 300}})  # fmt: skip
    resources = Resources(config)
    assert min(len(t) for t in resources.corpus("FinQA").texts) > 300
    work = work_left(config, resources.questions)
    workload = measure_workload(config, resources, work, answer_tokens=100)
    prompts, ratio = resources.prompts, config.estimate.chars_per_token
    rows = _rows(work, "oracle", "FinQA")
    pairs = zip(rows.column("question").to_pylist(), rows.column("gold_context").to_pylist(), strict=True)
    chars = sum(sum(len(m["content"]) for m in prompts.answer(q, [c])) for q, c in pairs)
    assert _cell(workload, "oracle", "FinQA").answers.prompt_tokens == round(chars / ratio)
    # Base-RAG's prompts are not made ahead (a dense retrieval): three contexts at the corpus's mean shown length.
    base = _rows(work, "base", "FinQA")
    question_chars = sum(len(q) for q in base.column("question").to_pylist())
    overhead = sum(len(m["content"]) for m in prompts.answer(STAND_IN, [""] * 3)) - len(STAND_IN)
    each = prompts.shown_length(10_000)  # every context is cut to the same shown length
    estimated = base.num_rows * (overhead + 3 * each) + question_chars
    assert _cell(workload, "base", "FinQA").answers.prompt_tokens == round(estimated / ratio)
    texts = resources.corpus("FinQA").texts
    assert workload.passage_tokens["FinQA/context"] == pytest.approx(sum(map(len, texts)) / len(texts) / ratio)


def test_reranked_pairs_dense_queries_and_question_tokens():
    """A reranker scores candidate_factor x k pairs per question; only dense methods embed their questions; the mean
    question's tokens are its characters over the ratio."""
    config = load_config(None, {"methods": ["bm25", "reranker", "base"], "retrieval_only": True, "limit": 5,
                                "data": {"subsets": ["FinQA"]}})  # fmt: skip
    resources = Resources(config)
    workload = measure_workload(config, resources, work_left(config, resources.questions), answer_tokens=100)
    questions = resources.questions.scored().column("question").to_pylist()
    per_question = config.retrieval.reranker.candidate_factor * config.retrieval.k
    assert _cell(workload, "reranker", "FinQA").reranked_pairs == len(questions) * per_question
    assert _cell(workload, "bm25", "FinQA").reranked_pairs == 0 and _cell(workload, "bm25", "FinQA").dense_queries == 0
    assert _cell(workload, "base", "FinQA").dense_queries == _cell(workload, "reranker", "FinQA").retrievals
    ratio = config.estimate.chars_per_token
    assert workload.question_tokens == pytest.approx(sum(map(len, questions)) / len(questions) / ratio)
    assert workload.summaries == {} and set(workload.passages) == {"FinQA/context"}


def test_prompts_sharing_a_prefix_compute_it_once_per_method(measured):
    """Prompts made ahead (pretrained-only, oracle, lexical retrieval) are computed as a prefix-reusing engine
    computes them in the run's order: each after the prefix it shares with the one before. Base-RAG's (dense, not
    made ahead) share the system prompt and, per gold context, its leading excerpt (assumed retrieved first)."""
    config, resources, work, workload = measured
    prompts, ratio = resources.prompts, config.estimate.chars_per_token
    system = len(prompts.answer("?", [])[0]["content"])
    made = known_answer_prompts(resources, work)
    assert {m for m, _ in made} == {"pretrained_only", "oracle"}  # not base, HyDE or summarization
    texts = ["".join(m["content"] for m in json.loads(p)) for p in sorted(p for ps in made.values() for p in ps)]
    computed = sum(len(t) - len(os.path.commonprefix([b, t])) for b, t in zip(["", *texts], texts, strict=False))  # noqa: RUF071 (characters are meant)
    cells = [_cell(workload, m, s).answers for m, s in made]
    assert abs(sum(c.to_compute for c in cells) - computed / ratio) <= len(cells)
    pretrained = _cell(workload, "pretrained_only", "FinQA").answers
    assert pretrained.computed_tokens < pretrained.prompt_tokens - 4 * system / ratio  # more than the system prompt
    base = _cell(workload, "base", "FinQA").answers
    rows = _rows(work, "base", "FinQA")
    distinct = len(set(rows.column("context_id").to_pylist()))
    assert distinct == 5  # five questions of five contexts: nothing shared beyond the system prompt
    assert abs(base.computed_tokens - (base.prompt_tokens - 4 * system / ratio)) <= 1
    total = workload.total("answers")
    assert total.prompts == sum(m.answers.prompts for m in workload.methods)
    assert total.output_tokens == sum(m.answers.output_tokens for m in workload.methods)
    assert total.to_compute == sum(m.answers.to_compute for m in workload.methods)


def test_every_method_s_answer_prompts_are_estimated_from_the_stages_own_prompts():
    """For every registered method, the real prompting stages (`read_contexts`, `answer_prompts`) on the planned
    rows, fed the gold context and the next ones in corpus order as the ranking, give prompts whose characters
    the estimate matches: exactly without contexts, within 20% with them (estimated at the corpus's mean length).
    Summary-reading methods are left out: their summaries do not exist before a run."""
    from t2rag.methods import METHODS as REGISTERED
    from t2rag.methods import PROMPTING
    from t2rag.stages import built
    from t2rag.stages.base import run_chain, with_columns

    names = [m for m, method in REGISTERED.items() if method.reader != "retrieved_summary"]
    config = load_config(None, {"methods": names, "generator": "qwen2.5-0.5b", "limit": 8,
                                "data": {"subsets": ["FinQA"]}})  # fmt: skip
    resources = Resources(config)
    work = work_left(config, resources.questions)
    workload = measure_workload(config, resources, work, answer_tokens=100)
    corpus, k, ratio = resources.corpus("FinQA"), config.retrieval.k, config.estimate.chars_per_token
    stages = built(resources, PROMPTING)
    for name in names:
        rows = _rows(work, name, "FinQA")
        firsts = [corpus.positions[c] for c in rows.column("context_id").to_pylist()]
        ranked = [[corpus.context_ids[(f + i) % len(corpus)] for i in range(k + 2)] for f in firsts]
        rows = with_columns(rows, {"context_ids": pa.array(ranked, pa.list_(pa.string()))})
        prompts = run_chain(stages, rows).column("messages_json").to_pylist()
        chars = sum(sum(len(m["content"]) for m in json.loads(p)) for p in prompts)
        estimated = _cell(workload, name, "FinQA").answers
        assert estimated.prompts == rows.num_rows == 8, name
        if REGISTERED[name].reader == "none":
            assert estimated.prompt_tokens == round(chars / ratio), name
        else:
            assert estimated.prompt_tokens == pytest.approx(chars / ratio, rel=0.2), name


@pytest.mark.parametrize(
    ("a", "b"),
    [("", ""), ("", "abc"), ("abc", "abc"), ("abc", "abcd"), ("abcd", "abc"), ("abx", "abc"), ("xbc", "abc")],
)
def test_the_common_prefix_of_two_prompts(a, b):
    """Identical prompts, one the start of the other, and prompts that part at the first or last character."""
    assert _common_prefix(a, b) == len(os.path.commonprefix([a, b]))  # noqa: RUF071 (characters are meant)
