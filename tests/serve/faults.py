"""Generator deployments bound only by the tests: one never answers in time (the 504 path), one never finishes
starting (the readiness path)."""

from __future__ import annotations

import asyncio

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
