"""Generation throughput of vLLM through the run's generator path (a replica of the generator service, a Ray actor
holding the in-process engine, fed batch by batch as `ray_jobs.generator_service` feeds it) against the same engine
given every prompt at once (`vllm.LLM.chat`), on the oracle's real answer prompts over FinQA dev contexts with
several questions each, measured in one run. Run it in the vLLM environment:

    make vllm && T2RAG_MODELS=.venv-vllm/models .venv-vllm/bin/python bench/vllm_throughput.py [--contexts 4]

Four engines, each started before its clock starts, prefix caching on in all: `direct` (all prompts in data order in
one call), `service, reuse off` (`prefix_reuse: false`: batches of `batch_size` in data order), `service, reuse
on` (the rows in the plan's order, by gold context; each batch sorted by prefix), both with two batches in flight
as a run's two clients per replica send them, and `service, reuse on` one batch at a time (what one `LLM.chat`
per batch amounted to). Prompt tokens/s count every prompt token, computed or reused, so reuse shows as a higher
rate; the ratios are the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def answer_requests(contexts: int, max_tokens: int, context_chars: int):
    """The oracle's answer prompts for every question of the first `contexts` shared FinQA dev contexts, in data
    order, with each question's gold context id."""
    import pyarrow.parquet as pq

    from bench.prefix_reuse import shared_context_layout
    from t2rag.generation.base import ChatRequest, SamplingParams
    from t2rag.prompts import PromptConfig, Prompts

    with tempfile.TemporaryDirectory() as tmp:
        root = shared_context_layout(Path(tmp), contexts)
        rows = pq.read_table(next(root.rglob("*.parquet"))).to_pylist()
    prompts = Prompts(PromptConfig(max_context_chars=context_chars))
    params = SamplingParams(max_tokens=max_tokens)  # greedy, unconstrained: the engine's own speed
    return [(ChatRequest(prompts.answer(r["question"], [r["context"]]), params), r["context_id"]) for r in rows]


def direct(requests, config) -> dict:
    import vllm

    from t2rag.generation.vllm_engine import in_process_engine_kwargs, in_process_env, model_source, sampling_dict

    os.environ.update(in_process_env(config))
    llm = vllm.LLM(model=model_source(config), **in_process_engine_kwargs(config))  # the replicas' engine
    params = vllm.SamplingParams(**sampling_dict(requests[0].params, constrained_json=False))
    started = time.perf_counter()
    outputs = llm.chat([list(r.messages) for r in requests], params, use_tqdm=False)
    seconds = time.perf_counter() - started
    figures = _figures(
        seconds,
        sum(len(o.prompt_token_ids) for o in outputs),
        sum(o.num_cached_tokens or 0 for o in outputs),
        sum(len(o.outputs[0].token_ids) for o in outputs),
    )
    del llm
    gc.collect()
    return figures


def through_service(requests, config, seed: int, in_flight: int) -> dict:
    """The requests through one replica of the generator service, `batch_size` rows a call, as given, with
    `in_flight` calls outstanding (a run's client pool keeps two per replica)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import ray

    from ray_jobs.generator_service import GeneratorService
    from t2rag.config import RunConfig
    from t2rag.generation.requests import request_columns

    # A seed of its own: the replica's generation cache must not answer from another path's run (greedy decoding
    # ignores it).
    config = config.model_copy(update={"sampling": config.sampling.model_copy(update={"seed": seed})})
    requests = [type(r)(r.messages, config.sampling.model_copy(update={"max_tokens": r.params.max_tokens}))
                for r in requests]  # fmt: skip
    service = GeneratorService(RunConfig(generator=config, methods=["oracle"]))
    (replica,) = service.replicas
    ray.get(replica.pending.remote())  # waits for the actor to start and load the engine, as `direct` does first
    batches = [pa.table(request_columns(requests[i:][: config.batch_size]))
               for i in range(0, len(requests), config.batch_size)]  # fmt: skip
    started = time.perf_counter()
    sent, outstanding = [], []
    for batch in batches:
        if len(outstanding) >= in_flight:
            _, outstanding = ray.wait(outstanding, num_returns=1)
        sent.append(replica.generate.remote(batch))
        outstanding.append(sent[-1])
    outputs = ray.get(sent)
    seconds = time.perf_counter() - started
    service.stop()
    out = pa.concat_tables(outputs)
    errors = [e for e in out.column("generation_error").to_pylist() if e]
    assert not errors, errors[:3]
    total = lambda name: int(pc.sum(out.column(name)).as_py() or 0)  # noqa: E731
    return _figures(seconds, total("prompt_tokens"), total("cached_prompt_tokens"), total("completion_tokens"))


def _figures(seconds: float, prompt: int, cached: int, output: int) -> dict:
    return {
        "seconds": round(seconds, 2),
        "prompt_tokens_per_s": round(prompt / seconds, 1),
        "output_tokens_per_s": round(output / seconds, 1),
        "prompt_tokens": prompt,
        "cached_share": round(cached / prompt, 4) if prompt else None,
        "output_tokens": output,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=4, help="shared FinQA dev contexts (all their questions)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--context-chars", type=int, default=1500, help="each context clipped to this many")
    parser.add_argument("--preset", default="vllm-cpu-smollm2")
    args = parser.parse_args()

    from ray_jobs.generator_service import CLIENTS_PER_REPLICA
    from ray_jobs.local_cluster import start_local_cluster, stop_local_cluster
    from t2rag.generation.registry import PRESETS

    config = PRESETS[args.preset].model_copy(update={"enable_prefix_caching": True})
    rows = answer_requests(args.contexts, args.max_tokens, args.context_chars)
    in_data_order = [r for r, _ in rows]
    by_context = [r for r, _ in sorted(rows, key=lambda row: row[1])]  # the plan's order with prefix reuse
    result = {"prompts": len(rows), "contexts": args.contexts, "direct": direct(in_data_order, config)}
    os.environ["T2RAG_CACHE"] = tempfile.mkdtemp()  # the replicas' generation cache starts empty
    start_local_cluster(num_cpus=12, num_gpus=1, log_to_driver=False)  # as `t2rag eval --runner ray` starts one
    off = config.model_copy(update={"prefix_reuse": False})
    clients = CLIENTS_PER_REPLICA  # as a run feeds each replica
    result["service_reuse_off"] = through_service(in_data_order, off, seed=1, in_flight=clients)
    result["service_reuse_on"] = through_service(by_context, config, seed=2, in_flight=clients)
    result["service_reuse_on_one_batch_at_a_time"] = through_service(by_context, config, seed=3, in_flight=1)
    stop_local_cluster()
    rate = {k: v["prompt_tokens_per_s"] for k, v in result.items() if isinstance(v, dict)}
    result["reuse_off_over_direct"] = round(rate["service_reuse_off"] / rate["direct"], 3)
    result["reuse_on_over_direct"] = round(rate["service_reuse_on"] / rate["direct"], 3)
    result["reuse_on_over_off"] = round(rate["service_reuse_on"] / rate["service_reuse_off"], 3)
    result["two_in_flight_over_one"] = round(rate["service_reuse_on"] / rate["service_reuse_on_one_batch_at_a_time"], 3)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
