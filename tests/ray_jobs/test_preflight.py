"""`t2rag plan` and the check `eval --runner ray` runs before it loads anything."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from ray_jobs.capacity import Node
from ray_jobs.preflight import Target, cluster_file_target, local_target, make_plan, render
from t2rag.cli import main
from t2rag.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = {"data": {"source": None, "subsets": ["FinQA", "TAT-DQA"]}}


def test_the_paper_config_fits_one_8_gpu_node_with_its_resources_loads_and_estimate():
    config = load_config(ROOT / "configs/paper_table3.yaml", SAMPLE)
    plan = make_plan(config, cluster_file_target(str(ROOT / "cluster.yaml"), max_workers=1))
    assert plan.refusal is None
    held = [p for p in plan.pools if p.phase in ("run", "evaluate")]
    assert sum(p.shape.actors * p.shape.gpus for p in held) == 8  # the whole node, no more
    (generator,) = [p for p in plan.pools if p.role == "generator"]
    assert generator.phase == "run" and generator.engine == "vllm" and generator.shape.accelerator == "H100"
    assert (generator.shape.actors, generator.shape.gpus) == (6, 1.0)
    assert {p.role: p.shape.gpus for p in held if p.engine is None and p.shape.gpus} == {"queries": 1.0, "rerank": 1.0}
    # One engine per replica for the whole run: summaries, HyDE's documents and the answers share it.
    assert plan.model_loads()["casperhansen/llama-3.3-70b-instruct-awq"] == 6
    e = plan.estimate
    assert e.wall_s is not None and e.wall_s > 0 and e.gpu_hours > 0
    assert set(e.phases) == {"index", "evaluate"}
    assert set(e.sources) == {"casperhansen/llama-3.3-70b-instruct-awq", "intfloat/multilingual-e5-large-instruct",
                              "cross-encoder/ms-marco-MiniLM-L-6-v2"}  # fmt: skip
    text = render(plan)
    assert "Fits: yes" in text and "Model loads: casperhansen/llama-3.3-70b-instruct-awq x6" in text


def _paper_plan(nodes=None, **generator):
    config = load_config(
        ROOT / "configs/paper_table3.yaml", {**SAMPLE, "generator": generator} if generator else SAMPLE
    )
    target = cluster_file_target(str(ROOT / "cluster.yaml"), max_workers=1)
    return make_plan(config, target if nodes is None else Target("test nodes", nodes))


def _evaluation_times(plan) -> list[float]:
    """The evaluation's pools and the generator service's HyDE and answers: they run at once."""
    pools = plan.estimate.pools
    return [t.seconds for t in pools if t.pool.phase == "evaluate" or (t.pool.phase == "run" and "answers" in t.note)]


def test_stages_without_a_model_share_the_retrievals_actors(tmp_path):
    """The main job's prompts are made in the retrieval actors of its answered rows, and the hashing embedder's
    queries are embedded in the retrieval actors; a sharded retrieval keeps every other stage out of its actors."""
    main = load_config(ROOT / "configs/main.yaml", SAMPLE)
    main_job = make_plan(main, local_target(main))
    placed = [(p.phase, p.role, p.stages, p.model) for p in main_job.pools if p.role != "generator"]
    assert placed == [
        ("index", "passages", ("embed_passages",), "all-MiniLM-L6-v2"),
        ("evaluate", "queries", ("embed_queries",), "all-MiniLM-L6-v2"),
        ("evaluate", "retrieve", ("retrieve",), None),
        ("evaluate", "retrieve", ("retrieve", "read_contexts", "answer_prompts"), None),
    ]
    fields = {**SAMPLE, "out": str(tmp_path), "methods": ["base"], "retrieval_only": True}
    hashing = load_config(None, {**fields, "retrieval": {"embedder": {"model": "hashing"}}})
    hashing_plan = make_plan(hashing, local_target(hashing))
    assert [(p.role, p.stages, p.model) for p in hashing_plan.pools] == [
        ("passages", ("embed_passages",), None),
        ("retrieve", ("embed_queries", "retrieve"), None),
    ]
    sharded = load_config(None, {**fields, "retrieval": {"embedder": {"model": "hashing"}, "shards": 2}})
    assert [(p.role, p.stages, p.shape.actors) for p in make_plan(sharded, local_target(sharded)).pools] == [
        ("passages", ("embed_passages",), 1),
        ("queries", ("embed_queries",), 1),
        ("retrieve", ("retrieve",), 2),
    ]


def test_the_plan_names_every_model_and_whether_this_machine_can_have_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    plan = _paper_plan()
    roles = {m.role: m for m in plan.models}
    assert [roles[r].model for r in ("embedder", "reranker", "generator")] == [
        "intfloat/multilingual-e5-large-instruct", "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "casperhansen/llama-3.3-70b-instruct-awq"]  # fmt: skip
    assert not any(m.available for m in plan.models)  # none is cached here, and the Hub is off
    assert plan.to_dict()["models"][2]["methods"] == roles["generator"].methods
    text = render(plan)
    assert "- reranker cross-encoder/ms-marco-MiniLM-L-6-v2 (for reranker): NO, not a local directory" in text


def test_the_estimate_waits_for_the_slowest_evaluation_pool_and_indexes_one_pool_after_another():
    plan = _paper_plan()
    e, times = plan.estimate, _evaluation_times(plan)
    assert len([t for t in times if t > 0]) == 3 and e.phases["evaluate"] == max(times) < sum(times)
    index = [t.seconds for t in e.pools if t.pool.phase == "index" or t.note.startswith("summaries")]
    assert len([t for t in index if t > 0]) == 2 and e.phases["index"] == pytest.approx(sum(index)) != max(index)
    assert e.wall_s == pytest.approx(e.phases["index"] + e.phases["evaluate"])
    # The service's 6 GPUs are held all along, the other two pools' GPUs while they work: between 6 and 8 GPUs.
    assert 6 * e.wall_s / 3600 < e.gpu_hours < 8 * e.wall_s / 3600


def test_more_generator_replicas_share_its_work():
    """The answers' generation time (the first generation part carries the one model load) halves with twice
    the replicas (less the system prompt each further replica computes once)."""
    six, twelve = (_paper_plan(nodes=[Node("big", 400, 16, "H100")], replicas=n) for n in (6, 12))
    answers = [next(t.seconds for t in p.estimate.pools if t.pool.role == "generator" and "answers" in t.note)
               for p in (six, twelve)]  # fmt: skip
    assert answers[0] == pytest.approx(2 * answers[1], rel=1e-3) and answers[0] < 2 * answers[1]


def test_gpu_hours_count_every_pool_for_the_time_it_holds_its_gpus():
    """The service's GPUs for the whole run, each index pool's while it works, the evaluation pools' for the
    evaluation phase: dropping any of the three changes the figure."""
    e = _paper_plan().estimate
    held = sum(p.shape.actors * p.shape.gpus for p in {t.pool for t in e.pools if t.pool.phase == "run"})
    indexing = sum(t.seconds * t.pool.shape.actors * t.pool.shape.gpus for t in e.pools if t.pool.phase == "index")
    evaluating = sum(p.shape.actors * p.shape.gpus for p in {t.pool for t in e.pools if t.pool.phase == "evaluate"})
    assert held == 6 and evaluating == 2 and indexing > 0
    assert e.gpu_hours == pytest.approx((held * e.wall_s + indexing + evaluating * e.phases["evaluate"]) / 3600)


def _answers(plan):
    (answers,) = [t for t in plan.estimate.pools if t.pool.role == "generator" and "answers" in t.note]
    return answers


def test_answer_time_is_the_tokens_to_compute_over_the_rate_per_gpu_of_every_replica(tmp_path):
    """With a rates file of round figures: the time of the answers is (tokens computed under prefix reuse / prompt
    rate + output tokens / output rate) / (replicas x GPUs per replica); reuse off computes every prompt token."""
    model = "casperhansen/llama-3.3-70b-instruct-awq"
    rates = yaml.safe_load((ROOT / "t2rag/reference/rates.yaml").read_text())
    rates["generators"][model].update(prompt_tokens_per_s=1000, output_tokens_per_s=100, load_s=0)
    path = tmp_path / "rates.yaml"
    path.write_text(yaml.safe_dump(rates))
    target = Target("test nodes", [Node("big", 400, 16, "H100")])

    def plan(**generator):
        overrides = {**SAMPLE, "estimate": {"rates": str(path)}, "generator": generator}
        return make_plan(load_config(ROOT / "configs/paper_table3.yaml", overrides), target)

    for tp, reuse in ((1, True), (2, True), (2, False)):
        p = plan(tensor_parallel_size=tp, replicas=4, prefix_reuse=reuse)
        answers = _answers(p)
        work = p.workload.total("pre_answer") + p.workload.total("answers")
        assert (answers.pool.shape.actors, answers.pool.shape.gpus) == (4, tp)
        assert (work.to_compute < work.prompt_tokens) is reuse
        expected = (work.to_compute / 1000 + work.output_tokens / 100) / (4 * tp)
        assert answers.seconds == pytest.approx(expected), (tp, reuse)


def test_the_generator_service_is_placed_with_every_index_pool_and_with_the_evaluation():
    """The run's six single-GPU engines are held while the passages are embedded (one GPU) and while queries are
    embedded and contexts reranked (one GPU each): 7 GPUs index but cannot evaluate, 6 cannot index either."""
    seven = _paper_plan(nodes=[Node("head", 8, 0), Node("gpus", 64, 7, "H100")])
    assert [fit.fits for fit in seven.fits.values()] == [True, True, False]  # two index pools, then the evaluation
    refusal = seven.refusal
    assert (
        refusal.startswith("the run cannot be placed: the evaluate pool")
        and "the cluster has 72 CPUs and 7 GPUs" in refusal
    )
    text = render(seven)
    assert f"Fits: NO: {refusal}" in text and "Fits: yes" not in text
    six = _paper_plan(nodes=[Node("head", 8, 0), Node("gpus", 64, 6, "H100")])
    (passages,) = [fit for phase, fit in six.fits.items() if "embed_passages" in phase]
    assert not passages.fits and passages.pool.role == "passages"
    assert [fit.fits for phase, fit in six.fits.items() if "embed_passages" not in phase] == [True, False]


def _needs_two_gpus(tmp_path) -> Path:
    path = tmp_path / "two_gpus.yaml"
    fields = {"methods": ["base"], "retrieval_only": True, "runner": "ray", "out": str(tmp_path / "run"),
              "ray": {"embed_gpus": 2, "num_gpus": 1}}  # fmt: skip
    path.write_text(yaml.safe_dump(fields))
    return path


def test_plan_refuses_in_seconds_naming_the_pool(capsys, tmp_path):
    start = time.perf_counter()
    code = main(["plan", "--config", str(_needs_two_gpus(tmp_path)), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and time.perf_counter() - start < 30
    assert err.count("\n") == 1 and err.startswith("t2rag: error: the run cannot be placed:")
    assert "index pool 'embed_passages" in err and "2 GPUs; the cluster has 1" in err
    plan = json.loads(out)  # the plan is still printed, as exactly one JSON document
    assert plan["fits"] is False and plan["refusal"] in err


@pytest.mark.slow
def test_eval_on_ray_refuses_before_loading_anything(capsys, tmp_path):
    """A local Ray cluster declaring one (fake) GPU; the run asks for two: refused in seconds, nothing written."""
    start = time.perf_counter()
    code = main(["eval", "--config", str(_needs_two_gpus(tmp_path))])
    _, err = capsys.readouterr()
    assert code == 2 and time.perf_counter() - start < 60
    assert err.strip().splitlines()[-1].startswith("t2rag: error: the run cannot be placed: the index pool")
    assert "alone needs 2 GPUs; the cluster has 1" in err
    assert not (tmp_path / "run").exists()
