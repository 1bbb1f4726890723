"""Rates measured where the run will run: `t2rag rates measure --config FILE`.

A short probe through the run's own generator and embedder on this machine, fitted to what the plan's estimate
needs, and written as a rates file in the packaged layout (`t2rag/reference/rates.yaml`) with its source:

- the generator, as the run configures it: its load time; three of the run's own answer prompts (made by the
  run's stages, as the plan makes them: the shortest, the median and the longest), each prefilled (`max_tokens` 1)
  after what the engine reuses of the one before, which fits prefill as `GeneratorRate.prefill_s` models it (each
  token slower the later it sits in its prompt); the shortest then answered in full, for the output tokens per
  second; and the characters per token of these prompts as the engine counts them (chat template included), which
  the plan then uses for every prompt. About 2 minutes for the main job's prompts on 2 cores;
- the embedder (when the run embeds): passages of the corpus embedded in batches, in tokens per second per CPU.

On the Ray runner the probe runs as one task with the resources of a generator replica, on a node of the kind the
pool will use.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import yaml

from t2rag.config import RunConfig
from t2rag.errors import ConfigError
from t2rag.estimate.rates import EmbedderRate, GeneratorRate, Rates, load_rates, position_sum
from t2rag.estimate.workload import known_answer_prompts
from t2rag.generation.base import ChatRequest
from t2rag.generation.registry import build_generator, engine_of
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.stages.work import work_left

#: Prompts prefilled, spread over the run's prompt lengths (the shortest, the median, the longest).
PROBE_PROMPTS = 3
#: Passages embedded to measure the embedder.
PROBE_PASSAGES = 64


@dataclass(frozen=True)
class Prefill:
    """One prompt prefilled: its characters, its tokens as the engine counts them, those it computed (the rest it
    reused), and the seconds."""

    chars: int
    tokens: int
    computed: int
    seconds: float


def fit_prefill(points: list[Prefill]) -> tuple[float, float]:
    """(tokens per second, slowdown per 1,000 tokens) of `GeneratorRate.prefill_s`, by least squares over the
    prefilled prompts (seconds = computed / rate + slowdown / rate x computed x (2 tokens - computed) / 1000); a
    slowdown below 0 is taken as 0."""
    x = np.asarray([(p.computed, position_sum(p.tokens, p.computed)) for p in points])
    y = np.asarray([p.seconds for p in points])
    if len(points) >= 2 and np.linalg.matrix_rank(x) == 2:
        (per_token, slower), *_ = np.linalg.lstsq(x, y, rcond=None)
        if per_token > 0 and slower >= 0:
            return float(1 / per_token), float(slower / per_token)
    return float(x[:, 0].sum() / y.sum()), 0.0


def run_prompts(config: RunConfig, resources: Resources) -> list[list[dict]]:
    """The run's answer prompts that need no model to make, shortest first."""
    made = known_answer_prompts(resources, work_left(config, resources.questions))
    prompts = sorted({m for ms in made.values() for m in ms}, key=len)
    if not prompts:
        raise ConfigError("no answer prompt of this run can be made without a model: add oracle to its methods")
    return [json.loads(p) for p in prompts]


def probe_prompts(prompts: list[list[dict]], count: int = PROBE_PROMPTS) -> list[list[dict]]:
    """`count` of the prompts, spread over their lengths, the shortest first."""
    picks = sorted({round(q * (len(prompts) - 1)) for q in np.linspace(0, 1, count)})
    return [prompts[i] for i in picks]


def chars_per_token(generator, prompts: list[list[dict]], points: list[Prefill]) -> float:
    """Characters per prompt token over the run's prompts as the engine counts them (chat template included): all
    of them where the engine counts tokens without generating, else the probe's."""
    count = getattr(generator, "count_prompt_tokens", None)
    if count is not None:
        chars = sum(len(m["content"]) for p in prompts for m in p)
        return chars / max(sum(count(p) for p in prompts), 1)
    return sum(p.chars for p in points) / max(sum(p.tokens for p in points), 1)


def measure_generator(config: RunConfig, resources: Resources) -> GeneratorRate:
    """The generator's rates on this machine: one replica as the run configures it (prefix reuse included), no
    disk cache."""
    engine = engine_of(config.generator)
    generator = build_generator(config.generator, cache=False)
    started = time.perf_counter()
    generator.load()
    load_s = time.perf_counter() - started
    sampling = config.generator.sampling
    points = []
    try:
        every = run_prompts(config, resources)
        prompts = probe_prompts(every)
        for messages in prompts:
            g = _generate(generator, messages, sampling.model_copy(update={"max_tokens": 1}))
            chars = sum(len(m["content"]) for m in messages)
            points.append(Prefill(chars, g.prompt_tokens, g.prompt_tokens - (g.cached_prompt_tokens or 0), g.seconds))
        answer = _generate(generator, prompts[0], sampling)
        per_token = chars_per_token(generator, every, points)
    finally:
        generator.close()
    prompt_rate, slowdown = fit_prefill(points)
    computed = answer.prompt_tokens - (answer.cached_prompt_tokens or 0)
    prefill_s = (computed + slowdown * position_sum(answer.prompt_tokens, computed)) / prompt_rate
    decode_s = max(answer.seconds - prefill_s, 1e-6)
    output_rate = max(answer.completion_tokens, 1) / decode_s
    where = _machine()
    lengths = ", ".join(f"{p.tokens:,} ({p.computed:,} computed)" for p in points)
    source = (
        f"measured on {where} by `t2rag rates measure` on {date.today().isoformat()}: {len(points)} of the run's "
        f"answer prompts ({lengths} tokens) prefilled after what the engine reused, fitted as {prompt_rate:.0f} "
        f"tokens/s at the start of a prompt, {slowdown:.3f} slower per 1,000 tokens before; one answer of "
        f"{answer.completion_tokens} tokens decoded at "
        f"{output_rate:.1f} tokens/s; {per_token:.2f} characters per token ({len(every)} prompts); load {load_s:.1f} s"
    )
    current = load_rates(config.estimate.rates).generators.get(config.generator.model)
    rate = GeneratorRate(
        device="gpu" if engine.placement(config.generator).gpus else "cpu",
        prompt_tokens_per_s=round(prompt_rate, 1),
        output_tokens_per_s=round(output_rate, 1),
        # One answer is a poor mean, unless it ran to max_tokens: a model that rambles always will.
        answer_tokens=(
            answer.completion_tokens if answer.finish_reason == "length" or not current else current.answer_tokens
        ),
        load_s=round(load_s, 1),
        prompt_slowdown_per_1k=round(slowdown, 4),
        chars_per_token=round(per_token, 3),
        source=source,
    )
    return rate


def _generate(generator, messages: list[dict], sampling):
    (g,) = generator.generate([ChatRequest(tuple(messages), sampling)])
    if g.error:
        raise ConfigError(f"the probe's prompt failed: {g.error}")
    return g


def measure_embedder(config: RunConfig, resources: Resources) -> EmbedderRate:
    """The embedder's tokens per second per CPU on a sample of the corpus's passages (this process's threads)."""
    import torch

    embedder = resources.embedder
    corpus = resources.corpus(resources.questions.subsets[0])
    texts = list(corpus.texts[:PROBE_PASSAGES])
    window = embedder.max_seq_length
    tokens = sum(len(ids) for ids in embedder.window(texts))  # as the model reads them: cut to its window
    embedder.embed_passages(texts[:4])  # the first batch warms the model up
    started = time.perf_counter()
    embedder.embed_passages(texts)
    seconds = time.perf_counter() - started
    cpus = torch.get_num_threads()
    current = load_rates(config.estimate.rates).embedders.get(config.retrieval.embedder.model)
    per_cpu = tokens / seconds / cpus
    return EmbedderRate(
        window=window,
        gpu_tokens_per_s=current.gpu_tokens_per_s if current else per_cpu * 100,
        cpu_tokens_per_s=round(per_cpu, 1),
        load_s=current.load_s if current else 3.0,
        source=(
            f"CPU: measured on {_machine()} by `t2rag rates measure` on {date.today().isoformat()}: {len(texts)} "
            f"passages, {tokens:,} tokens in {seconds:.2f} s on {cpus} threads; GPU: "
            + ("kept from the file it started from" if current else "not measured (100x the CPU figure, a guess)")
        ),
    )


def measure_rates(config: RunConfig) -> Rates:
    """The run's rates file with its generator's and embedder's entries measured on this machine."""
    if config.generator is None:
        raise ConfigError("rates measure needs a generator: set generator in the config or pass --generator")
    resources = Resources(config)
    rates = load_rates(config.estimate.rates)
    generator = measure_generator(config, resources)
    embedders = dict(rates.embedders)
    if embeds(config):
        embedders[config.retrieval.embedder.model] = measure_embedder(config, resources)
    return rates.model_copy(
        update={"generators": {**rates.generators, config.generator.model: generator}, "embedders": embedders}
    )


def embeds(config: RunConfig) -> bool:
    """Whether the run embeds (a dense method), so that the probe measures its embedder too."""
    return any(get_method(m).searches_vectors for m in config.methods)


def write_rates(rates: Rates, path: str) -> None:
    header = (
        "# Rates measured by `t2rag rates measure` (the other entries are those of the file it started from);\n"
        "# point a run config at this file with `estimate: {rates: THIS_FILE}`.\n"
    )
    body = yaml.safe_dump(rates.model_dump(exclude_none=True), sort_keys=False, width=110)
    Path(path).write_text(header + body, encoding="utf-8")


def _machine() -> str:
    return f"{platform.node() or 'this host'} ({os.cpu_count()} CPUs, {platform.machine()})"
