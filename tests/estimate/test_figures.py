"""The estimate's own figures against the same figures computed here another way (by hand from their definitions),
so that a slip in a formula fails a fast test instead of passing unseen into every plan."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from t2rag.config import load_config
from t2rag.estimate.plan_vs_run import against_run
from t2rag.estimate.rates import EmbedderRate, GeneratorRate, Rates, position_sum
from t2rag.estimate.workload import Workload, known_answer_prompts, measure_workload, planned_workload
from t2rag.resources import Resources
from t2rag.stages.work import work_left


def test_position_sum_is_the_summed_positions_of_the_computed_tokens():
    """The last `computed` of `length` tokens sit at positions length - computed .. length: their positions summed
    (each counting twice, as the prefill's slowdown counts them) over 1,000."""
    length, computed = 1000, 400
    by_hand = sum(2 * x + 1 for x in range(length - computed, length)) / 1000
    assert position_sum(length, computed) == pytest.approx(by_hand)
    assert position_sum(500, 500) == pytest.approx(250.0)  # a whole prompt: T^2 / 1000


def test_embedding_time_divides_the_tokens_among_every_actor():
    rate = EmbedderRate(window=256, gpu_tokens_per_s=1000.0, cpu_tokens_per_s=10.0, load_s=3.0, source="test")
    assert rate.seconds(12_000, actors=4, cpus=1.0, gpus=1.0) == pytest.approx(12_000 / 4000 + 3.0)
    assert rate.seconds(12_000, actors=2, cpus=6.0, gpus=0.0) == pytest.approx(12_000 / 120 + 3.0)


def test_passage_tokens_are_capped_at_the_embedders_window():
    workload = Workload([], {}, {"A/context": 10, "B/context": 5}, {"A/context": 900.0, "B/context": 100.0},
                        question_tokens=20.0, chars_per_token=4.0)  # fmt: skip
    assert workload.embedded_passage_tokens(256) == 10 * 256 + 5 * 100


@pytest.fixture
def oracle_run():
    config = load_config(None, {"methods": ["oracle"], "generator": "qwen2.5-0.5b", "limit": 2})
    resources = Resources(config)
    return config, resources, work_left(config, resources.questions)


def _known_chars(resources, work) -> list[int]:
    """Characters of each answer prompt the run will send, as its chat messages hold them."""
    prompts = [m for ms in known_answer_prompts(resources, work).values() for m in ms]
    return [sum(len(part["content"]) for part in json.loads(m)) for m in prompts]


def test_the_answers_position_sum_is_in_tokens_squared(oracle_run):
    """Without prefix reuse every token of every prompt is computed: its position sum is the sum of T^2 / 1000 over
    the prompts, T each prompt's characters over characters per token."""
    config, resources, work = oracle_run
    config = config.model_copy(update={"generator": config.generator.model_copy(update={"prefix_reuse": False})})
    ratio = 3.5
    answers = measure_workload(config, resources, work, 100, chars_per_token=ratio).total("answers")
    by_hand = sum((chars / ratio) ** 2 / 1000 for chars in _known_chars(resources, work))
    assert answers.position_sum == pytest.approx(by_hand, rel=1e-9)


def test_the_plan_counts_tokens_with_the_generators_measured_ratio(oracle_run):
    config, resources, work = oracle_run
    rate = GeneratorRate(device="cpu", prompt_tokens_per_s=100.0, output_tokens_per_s=10.0, answer_tokens=50,
                         load_s=1.0, chars_per_token=2.5, source="test")  # fmt: skip
    rates = Rates(generators={config.generator.model: rate}, embedders={}, rerankers={})
    workload = planned_workload(config, resources, work, rates)
    assert workload.chars_per_token == 2.5
    chars = _known_chars(resources, work)
    assert workload.total("answers").prompt_tokens == round(sum(chars) / 2.5)
    assert workload.total("answers").output_tokens == 50 * len(chars)


def test_records_without_prompt_tokens_are_not_answers():
    plan = {"answers": 3, "prompt_tokens": 300, "to_compute": 300, "output_tokens": 30, "generation_s": 3.0,
            "passages_s": None, "queries_s": None, "rates": "r.yaml",
            "keys": ["oracle\x1fq1", "oracle\x1fq2", "oracle\x1fq3"]}  # fmt: skip
    records = pa.table({"method": ["oracle"] * 3, "id": ["q1", "q2", "q3"],
                        "prompt_tokens": pa.array([100, None, 120], pa.int32()),
                        "cached_prompt_tokens": pa.array([0, None, 20], pa.int32()),
                        "completion_tokens": pa.array([10, None, 12], pa.int32()),
                        "generation_s": [1.0, None, 2.0]})  # fmt: skip
    actual = against_run(plan, records, {})["actual"]
    assert (actual["answers"], actual["prompt_tokens"], actual["to_compute"]) == (2, 220, 200)
