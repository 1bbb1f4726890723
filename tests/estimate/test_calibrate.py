"""`t2rag rates measure` against a scripted engine of known speed: the fit gives back its rates, and the plan made
with the file it writes predicts the engine's seconds for the run's own answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import pytest
import yaml

from t2rag.cli import main
from t2rag.estimate.calibrate import Prefill, fit_prefill
from t2rag.estimate.rates import GeneratorRate, load_rates
from t2rag.generation.base import ChatRequest, Generation, Generator
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.engine import Batching, Engine
from t2rag.generation.registry import ENGINES, register_engine

#: The scripted engine: 4 characters a token, 300 prompt tokens/s at the start of a prompt and 0.2 slower per
#: 1,000 tokens before, 40 output tokens/s, answers of 60 tokens; it reuses the prefix shared with the last prompt.
CHARS, PROMPT_RATE, SLOWDOWN, OUTPUT_RATE, ANSWER = 4, 300.0, 0.2, 40.0, 60
KNOWN = GeneratorRate(device="cpu", prompt_tokens_per_s=PROMPT_RATE, output_tokens_per_s=OUTPUT_RATE,
                      answer_tokens=ANSWER, load_s=0.0, prompt_slowdown_per_1k=SLOWDOWN, source="script")  # fmt: skip


class ScriptedConfig(GeneratorConfig):
    engine: Literal["scripted"] = "scripted"


class ScriptedGenerator(Generator):
    engine = "scripted"

    def __init__(self, config: ScriptedConfig):
        self.config = config
        self.last = ""

    @property
    def model_id(self) -> str:
        return "scripted"

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        out = []
        for r in requests:
            text = "".join(m["content"] for m in r.messages)
            shared = next((i for i, (a, b) in enumerate(zip(self.last, text, strict=False)) if a != b), 0)
            tokens, cached = len(text) // CHARS, shared // CHARS
            self.last = text
            answer = min(ANSWER, r.params.max_tokens)
            computed = tokens - cached
            seconds = KNOWN.prefill_s(computed, computed * (2 * tokens - computed) / 1000) + answer / OUTPUT_RATE
            reply = '{"reasoning_steps": ["x"], "final_formula": "1"}'
            out.append(Generation(reply, tokens, answer, seconds, finish_reason="stop", cached_prompt_tokens=cached))
        return out


class ScriptedEngine(Engine):
    name = "scripted"
    config_class = ScriptedConfig

    def build(self, config: ScriptedConfig) -> Generator:
        return ScriptedGenerator(config)

    def batching(self, config: ScriptedConfig) -> Batching:
        return "one_at_a_time"


ENGINE = ScriptedEngine()  # what a process told of this module by T2RAG_ENGINES registers (a Ray worker)


@pytest.fixture
def scripted():
    register_engine(ENGINE)
    yield
    ENGINES.pop("scripted")


def test_the_fit_recovers_a_known_rate_and_slowdown():
    points = [Prefill(0, t, c, KNOWN.prefill_s(c, c * (2 * t - c) / 1000)) for t, c in ((1400, 1400), (3500, 2700))]
    points.append(Prefill(0, 4500, 3700, KNOWN.prefill_s(3700, 3700 * (2 * 4500 - 3700) / 1000)))
    rate, slowdown = fit_prefill(points)
    assert rate == pytest.approx(PROMPT_RATE) and slowdown == pytest.approx(SLOWDOWN)
    flat = [Prefill(0, t, t, t / 100) for t in (1000, 2000, 4000)]
    assert fit_prefill(flat) == pytest.approx((100.0, 0.0))


def test_measure_writes_the_engines_rates_and_the_plan_then_predicts_its_seconds(scripted, tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "methods": ["oracle", "bm25"], "generator": {"engine": "scripted", "model": "script"}, "limit": 3,
        "out": str(tmp_path / "run"),
    }))  # fmt: skip
    out = tmp_path / "rates.yaml"
    assert main(["rates", "measure", "--config", str(config), "--out", str(out)]) == 0
    assert "generator: measured on" in capsys.readouterr().out
    rate = load_rates(out).generators["script"]
    assert rate.prompt_tokens_per_s == pytest.approx(PROMPT_RATE, rel=0.01)
    assert rate.prompt_slowdown_per_1k == pytest.approx(SLOWDOWN, rel=0.02)
    assert rate.output_tokens_per_s == pytest.approx(OUTPUT_RATE, rel=0.02)
    assert rate.chars_per_token == pytest.approx(CHARS, rel=0.01)
    assert load_rates(out).generators["qwen2.5-coder-0.5b"] == load_rates().generators["qwen2.5-coder-0.5b"]

    fields = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**fields, "estimate": {"rates": str(out), "answer_tokens": ANSWER}}))
    assert main(["eval", "--config", str(config), "--json"]) == 0
    import json

    checked = json.loads(capsys.readouterr().out)["plan_vs_run"]
    ratio = checked["actual_over_planned"]
    assert checked["actual"]["answers"] == 12 and ratio["answers"] == 1.0
    assert ratio["prompt_tokens"] == pytest.approx(1.0, abs=0.02)  # the prompts were made as the run makes them
    assert ratio["to_compute"] == pytest.approx(1.0, abs=0.05)  # the run's prefix order, each after the one before
    assert ratio["output_tokens"] == 1.0 and ratio["generation_s"] == pytest.approx(1.0, abs=0.05), checked


@pytest.mark.slow
def test_on_ray_the_probe_runs_as_a_task_placed_like_a_replica(scripted, tmp_path, monkeypatch):
    """With `runner: ray` the probe is one Ray task holding a replica's resources (on a local cluster here); the
    scripted engine's seconds are deterministic, so its rates are the ones measured in this process."""
    monkeypatch.setenv("T2RAG_ENGINES", __name__)  # the task's worker registers the engine as replicas do
    fields = {"methods": ["oracle", "bm25"], "generator": {"engine": "scripted", "model": "script"}, "limit": 2}
    here, there = tmp_path / "here.yaml", tmp_path / "there.yaml"
    here.write_text(yaml.safe_dump(fields))
    there.write_text(yaml.safe_dump({**fields, "runner": "ray", "ray": {"num_cpus": 2}}))
    assert main(["rates", "measure", "--config", str(here), "--out", str(tmp_path / "here_rates.yaml")]) == 0
    assert main(["rates", "measure", "--config", str(there), "--out", str(tmp_path / "there_rates.yaml")]) == 0
    local, remote = (load_rates(tmp_path / f"{n}_rates.yaml").generators["script"] for n in ("here", "there"))
    fitted = ("prompt_tokens_per_s", "prompt_slowdown_per_1k", "output_tokens_per_s", "chars_per_token")
    assert [getattr(remote, f) for f in fitted] == [getattr(local, f) for f in fitted]
