"""Generator deployments bound only by the tests: one never answers in time (the 504 path), one never finishes
starting (the readiness path), one answers every request with the same known number (the served parsing path, which
SmolLM2's answers rarely reach with a number)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from ray import serve


@serve.deployment(name="Generator")
class StalledGenerator:
    """Takes far longer than any test timeout; Serve cancels it when the ingress gives up."""

    async def generate(self, request: dict[str, str]) -> dict[str, object]:
        await asyncio.sleep(60)
        return {"raw_output": "too late", "generation_error": None}


@serve.deployment(name="Generator")
class NeverReadyGenerator:
    """Its replica never finishes starting, so its application never becomes ready."""

    async def __init__(self) -> None:
        await asyncio.sleep(3600)

    async def generate(self, request: dict[str, str]) -> dict[str, object]:
        raise AssertionError("never started")


#: What `ScriptedGenerator` answers, and the number the project's parser reads from it.
SCRIPTED_ANSWER = json.dumps(
    {"reasoning_steps": ["subtract"], "final_formula": "1500 - 1212.5", "computed_formula": "287.5"}
)
SCRIPTED_NUMBER = 287.5


class ScriptedAnswers:
    """Answers every request at once with `SCRIPTED_ANSWER`, whole or streamed in three pieces."""

    def _columns(self, request: dict[str, str]) -> dict[str, object]:
        from serve.generator import as_columns
        from t2rag.generation.base import Generation

        prompt = len(request["messages_json"]) // 4
        return as_columns(Generation(SCRIPTED_ANSWER, prompt_tokens=prompt, completion_tokens=20, finish_reason="stop"))

    async def generate(self, request: dict[str, str]) -> dict[str, object]:
        return self._columns(request)

    async def stream(self, request: dict[str, str]) -> AsyncIterator[dict[str, object]]:
        third = len(SCRIPTED_ANSWER) // 3
        for start in (0, third, 2 * third):
            yield {"text": SCRIPTED_ANSWER[start : start + third if start < 2 * third else None]}
        yield self._columns(request)


#: What RoutingGenerator answers a routing prompt: TAT-DQA first.
SCRIPTED_ROUTE = '{"ranking": ["TAT-DQA", "FinQA"]}'


class RoutingAnswers(ScriptedAnswers):
    """ScriptedAnswers, except that a routing prompt (the LLM router's) is answered with `SCRIPTED_ROUTE`."""

    def _columns(self, request: dict[str, str]) -> dict[str, object]:
        from serve.generator import as_columns
        from t2rag.generation.base import Generation

        if "You route a question" not in request["messages_json"]:
            return super()._columns(request)
        return as_columns(Generation(SCRIPTED_ROUTE, prompt_tokens=100, completion_tokens=12, finish_reason="stop"))


# The module's Ray has 4 CPUs, all taken: the scripted generators hold none.
ScriptedGenerator = serve.deployment(name="Generator", ray_actor_options={"num_cpus": 0})(ScriptedAnswers)
RoutingGenerator = serve.deployment(name="Generator", ray_actor_options={"num_cpus": 0})(RoutingAnswers)
