"""Prefix-aware routing on Ray: with two generator replicas, the prompts that share a leading context are served by
one replica, so the reuse a run gets stays what one replica gets."""

from __future__ import annotations

import secrets

import pytest

from bench.prefix_reuse import shared_context_layout
from ray_jobs import evaluate
from t2rag.config import load_config
from t2rag.run_folder.files import read_records

pytestmark = [pytest.mark.slow, pytest.mark.llm]


#: Added to each run's sampling seed: greedy decoding ignores the seed, but the generation cache keys on it, so no
#: run of this session finds another session's generations in a cache kept between sessions (T2RAG_TEST_CACHE) and
#: every run generates.
SESSION_SEED = secrets.randbits(30)


@pytest.fixture
def served(monkeypatch) -> list[list[dict[str, int]]]:
    """Per run, each replica's rows per route key, read from the replicas just before the service stops."""
    runs: list[list[dict[str, int]]] = []

    class Reporting(evaluate.GeneratorService):
        def stop(self) -> None:
            import ray

            if self._replicas:
                runs.append(ray.get([r.served_routes.remote() for r in self._replicas]))
            super().stop()

    monkeypatch.setattr(evaluate, "GeneratorService", Reporting)
    return runs


def _run(data, out, system: str, replicas: int) -> list[dict]:
    """An oracle run on Ray; the replica count is also in the sampling seed, so neither run finds the other's
    generations in the cache."""
    config = load_config(
        None,
        {
            "data": {"source": str(data)},
            "methods": ["oracle"],
            "runner": "ray",
            "out": str(out),
            "generator": {
                "preset": "smollm2-135m",
                "n_threads": 1,
                "sampling": {"max_tokens": 12, "seed": SESSION_SEED + replicas},
                "replicas": replicas,
                "batch_size": 4,
            },
            "prompts": {"max_context_chars": 1500, "answer_system": system},
            "ray": {"block_rows": 4},
        },
    )
    evaluate.run_ray(config)
    return read_records(str(out)).to_pylist()


def _share(records: list[dict]) -> float:
    return sum(r["cached_prompt_tokens"] for r in records) / sum(r["prompt_tokens"] for r in records)


def test_prompts_sharing_a_context_meet_one_replica(ray_local, served, short_system_prompt, tmp_path) -> None:
    data = shared_context_layout(tmp_path / "data", contexts=4)
    one = _run(data, tmp_path / "one", short_system_prompt, replicas=1)
    two = _run(data, tmp_path / "two", short_system_prompt, replicas=2)

    first, second = served[-1]
    assert first and second  # both replicas worked
    assert not set(first) & set(second)  # no leading context was computed on both
    assert sum(first.values()) + sum(second.values()) == len(two)
    assert len(set(first) | set(second)) == 4  # one route per context
    assert len(one) == len(two) == len({r["id"] for r in two})
    assert _share(one) >= 0.6
    assert abs(_share(two) - _share(one)) <= 0.10
