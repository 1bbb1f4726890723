"""Rates measured where the run will run: `t2rag rates measure --config FILE`.

A short probe through the run's own generator and embedder on this machine, fitted to what the plan's estimate
needs, and written as a rates file in the packaged layout (`t2rag/reference/rates.yaml`) with its source:

- the generator, as the run configures it: its load time; three of the run's own answer prompts (made by the
  run's stages, as the plan makes them: the shortest, the median and the longest), each prefilled (`max_tokens` 1)
  after what the engine reuses of the one before, which fits prefill as `GeneratorRate.prefill_s` models it (each
  token slower the later it sits in its prompt); the shortest then answered in full, for the output tokens per
  second; and the characters per token of these prompts as the engine counts them (chat template included), which
  the plan then uses for every prompt. About 2 minutes for the main job's prompts on 2 cores;
- the embedder (when the run embeds): passages of the corpus embedded in batches, in tokens per second per CPU;
- each plugin stage and plugin retriever the run's methods use: the method's ranking stages run on a first block of
  PROBE_WARM questions (its models load, its corpus is indexed: `load_s`), then on PROBE_ROWS more, timed stage by
  stage (`rows_per_s`, in this process, as one actor of the run's pool runs it).

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
import pyarrow as pa
import yaml

from t2rag import plugins
from t2rag.config import RunConfig
from t2rag.errors import ConfigError
from t2rag.estimate.rates import EmbedderRate, GeneratorRate, PluginRate, Rates, load_rates, position_sum
from t2rag.estimate.workload import known_answer_prompts
from t2rag.generation.base import ChatRequest
from t2rag.generation.registry import build_generator, engine_of
from t2rag.methods import get_method
from t2rag.resources import Resources
from t2rag.stages import built
from t2rag.stages.base import run_chain
from t2rag.stages.work import work_left

#: Prompts prefilled, spread over the run's prompt lengths (the shortest, the median, the longest).
PROBE_PROMPTS = 3
#: Passages embedded to measure the embedder.
PROBE_PASSAGES = 64
#: Questions of a plugin's first block (what it loads and indexes) and of the block that is timed.
PROBE_WARM = 4
PROBE_ROWS = 128


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
    """The run's rates file with its generator's, embedder's and plugins' entries measured on this machine (those
    the run has: a run of plugin methods alone needs no generator)."""
    if config.generator is None and not plugins_to_measure(config):
        raise ConfigError("rates measure needs a generator: set generator in the config or pass --generator")
    resources = Resources(config)
    rates = load_rates(config.estimate.rates)
    generators, embedders = dict(rates.generators), dict(rates.embedders)
    if config.generator is not None:
        generators[config.generator.model] = measure_generator(config, resources)
    if embeds(config):
        embedders[config.retrieval.embedder.model] = measure_embedder(config, resources)
    measured = measure_plugins(config, resources)
    return rates.model_copy(
        update={"generators": generators, "embedders": embedders, "plugins": {**rates.plugins, **measured}}
    )


def plugins_to_measure(config: RunConfig) -> dict[str, str]:
    """Each plugin stage and plugin retriever the run's methods use, with the first method that runs it."""
    used = config.plugins_used()
    out: dict[str, str] = {}
    for name in config.methods:
        method = get_method(name)
        for stage in method.stages:
            if stage in used.get("stages", {}):
                out.setdefault(stage, name)
        if method.retriever in used.get("retrievers", {}):
            out.setdefault(method.retriever, name)
    return out


def measure_plugins(config: RunConfig, resources: Resources) -> dict[str, PluginRate]:
    """Each plugin stage's and retriever's rate on this machine: its method's ranking stages on a first block of
    PROBE_WARM questions, then timed on PROBE_ROWS more (the retrieval stage's time is its retriever's)."""
    questions = resources.questions.scored()
    out: dict[str, PluginRate] = {}
    for name, method_name in plugins_to_measure(config).items():
        method = get_method(method_name)
        steps = built(resources, method.stages)
        seconds: dict[str, float] = {}

        def timed(stage: str, rows: int, spent: float, seconds=seconds) -> None:
            seconds[stage] = seconds.get(stage, 0.0) + spent

        warm = _rows(questions, 0, PROBE_WARM, method_name)
        run_chain(steps, warm, timed)
        load = seconds.pop("retrieve" if name == method.retriever else name, 0.0)
        seconds.clear()
        block = _rows(questions, PROBE_WARM, PROBE_ROWS, method_name)
        run_chain(steps, block, timed)
        spent = seconds["retrieve" if name == method.retriever else name]
        rows = block.num_rows
        origin = plugins.origin_of("t2rag.stages" if name in method.stages else "t2rag.retrievers", name).label
        out[name] = PluginRate(
            rows_per_s=round(rows / spent, 2),
            load_s=round(max(0.0, load - PROBE_WARM * spent / rows), 2),
            source=f"measured on {_machine()} by `t2rag rates measure` on {date.today().isoformat()}: {origin}, "
            f"method {method_name}, {rows} questions in {spent:.3f} s after a first block of {PROBE_WARM}",
        )
    return out


def _rows(questions: pa.Table, start: int, count: int, method: str) -> pa.Table:
    """Rows of the plan's shape for `count` questions from `start` (wrapping round a small data set)."""
    n = questions.num_rows
    picked = questions.take(pa.array([(start + i) % n for i in range(count)]))
    columns = {c: picked.column(c) for c in ("id", "subset", "question", "context_id")}
    return pa.table({**columns, "method": pa.array([method] * count, pa.string())})


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
