"""A generator deployment that never answers in time, bound only by the tests (the 504 path)."""

from __future__ import annotations

import asyncio

from ray import serve


@serve.deployment(name="Generator")
class StalledGenerator:
    """Takes far longer than any test timeout; Serve cancels it when the ingress gives up."""

    async def generate(self, request: dict[str, str]) -> dict[str, object]:
        await asyncio.sleep(60)
        return {"raw_output": "too late", "generation_error": None}
