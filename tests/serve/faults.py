"""A generator deployment that never answers in time, bound only by the tests (the 504 path)."""

from __future__ import annotations

import asyncio

from ray import serve

from t2rag.generation.base import ChatRequest, Generation


@serve.deployment(name="Generator")
class StalledGenerator:
    """Takes far longer than any test timeout; Serve cancels it when the ingress gives up."""

    async def generate(self, request: ChatRequest) -> Generation:
        await asyncio.sleep(60)
        return Generation(text="too late")
