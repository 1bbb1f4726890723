"""Generation throughput of vLLM in a replica of the run's generator service (a Ray actor holding the in-process
engine, ray_jobs.generator_service) against the same engine driven directly (`vllm.LLM.chat`), on the same real
answer prompts, measured in one run. Run it in the vLLM environment:

    make vllm && T2RAG_MODELS=.venv-vllm/models .venv-vllm/bin/python bench/vllm_throughput.py [--questions 32]

Both paths start an engine, so each is timed on N and on 2N other prompts and the steady-state rate is the marginal one:
N / (T(2N) - T(N)), after each path has started its engine. Prompt and output
tokens/s are reported for the 2N run; the ratio Ray/direct is the figure to compare.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def answer_requests(n: int, max_tokens: int):
    """Answer prompts for the first n scorable questions, each with its gold context (the oracle method)."""
    from t2rag.data import build_corpora, load_questions
    from t2rag.generation.base import ChatRequest, SamplingParams
    from t2rag.prompts import PromptConfig, Prompts

    questions = load_questions(None)
    corpora = build_corpora(questions)
    rows = questions.scored().slice(0, n).to_pylist()
    prompts = Prompts(PromptConfig(max_context_chars=1500))
    params = SamplingParams(max_tokens=max_tokens)  # greedy, unconstrained: the engine's own speed
    requests = []
    for row in rows:
        corpus = corpora[row["subset"]]
        text = corpus.texts[corpus.positions[row["context_id"]]]
        requests.append(ChatRequest(prompts.answer(row["question"], [text]), params))
    return requests


def direct(requests, config) -> dict[str, float]:
    import vllm

    from t2rag.generation.vllm_engine import model_source, sampling_dict, vllm_engine_kwargs

    os.environ.update(config.engine_env)
    llm = vllm.LLM(model=model_source(config), **vllm_engine_kwargs(config))
    params = vllm.SamplingParams(**sampling_dict(requests[0].params, constrained_json=False))
    timings = {}
    for count, part in _parts(requests):
        started = time.perf_counter()
        outputs = llm.chat([list(r.messages) for r in part], params, use_tqdm=False)
        timings[count] = time.perf_counter() - started
    tokens_in = sum(len(o.prompt_token_ids) for o in outputs)
    tokens_out = sum(len(o.outputs[0].token_ids) for o in outputs)
    del llm
    gc.collect()
    return _figures(timings, tokens_in, tokens_out)


def through_ray(requests, config) -> dict[str, float]:
    import pyarrow as pa
    import ray

    from ray_jobs.generator_service import GeneratorService
    from t2rag.config import RunConfig
    from t2rag.generation.requests import request_columns

    service = GeneratorService(RunConfig(generator=config, methods=["oracle"]))
    (replica,) = service.replicas
    ray.get(replica.pending.remote())  # waits for the actor to start and load the engine, as `direct` does first
    timings = {}
    for count, part in _parts(requests):
        batch = pa.table(request_columns(part))
        started = time.perf_counter()
        out = ray.get(replica.generate.remote(batch))
        timings[count] = time.perf_counter() - started
        errors = [e for e in out.column("generation_error").to_pylist() if e]
        assert not errors, errors[:3]
    service.stop()
    tokens_in = sum(out.column("prompt_tokens").to_pylist())
    tokens_out = sum(out.column("completion_tokens").to_pylist())
    return _figures(timings, tokens_in, tokens_out)


def _parts(requests):
    """N prompts, then 2N others: the replica caches generations, so the large run must not repeat the small."""
    n = len(requests) // 3
    return [(n, requests[:n]), (2 * n, requests[n : 3 * n])]


def _figures(timings: dict[int, float], tokens_in: int, tokens_out: int) -> dict[str, float]:
    small, large = sorted(timings)
    marginal = timings[large] - timings[small]
    return {
        "seconds_small": round(timings[small], 2),
        "seconds_large": round(timings[large], 2),
        "steady_prompts_per_s": round((large - small) / marginal, 3),
        "prompt_tokens_per_s": round(tokens_in / timings[large], 1),
        "output_tokens_per_s": round(tokens_out / timings[large], 1),
        "prompt_tokens": tokens_in,
        "output_tokens": tokens_out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=32, help="2N prompts in the large run (N in the small)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--preset", default="vllm-cpu-smollm2")
    args = parser.parse_args()

    from ray_jobs.local_cluster import start_local_cluster, stop_local_cluster
    from t2rag.generation.config import PRESETS

    config = PRESETS[args.preset]
    requests = answer_requests(3 * args.questions // 2, args.max_tokens)
    result = {"direct": direct(requests, config)}
    start_local_cluster(num_cpus=12, num_gpus=1, log_to_driver=False)  # as `t2rag eval --engine ray` starts one
    result["ray"] = through_ray(requests, config)
    stop_local_cluster()
    result["ratio_ray_over_direct"] = round(
        result["ray"]["steady_prompts_per_s"] / result["direct"]["steady_prompts_per_s"], 3
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
