"""The queues retrieval requests wait in inside an ingress replica: one lane per stage chain, each with its own
batches (serve/batcher.py) and admission control (serve/admission.py), so a lexical search never waits behind the
encoding of a batch of dense queries, nor is it refused for their pace."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from serve.admission import Admission, Overloaded
from serve.batcher import Batcher
from serve.deadlines import Deadline
from serve.errors import GatewayTimeout, Unavailable
from serve.retrieval import DeadlineExceeded, Query, Ranking, RetrievalService, served_chain
from serve.settings import ServeSettings
from t2rag.methods import Method


@dataclass(frozen=True)
class Lane:
    """The queue one stage chain's retrieval requests wait in: its batches and its admission control."""

    batcher: Batcher[Query, Ranking]
    admission: Admission


class Lanes:
    """A replica's retrieval, one lane per stage chain of its methods."""

    def __init__(self, retrieval: RetrievalService, settings: ServeSettings):
        self.lanes = {
            chain: Lane(
                Batcher(retrieval.rank, settings.max_batch_size),
                Admission(settings.max_ongoing_requests, settings.max_queue_wait_s, settings.retry_after_s),
            )
            for chain in retrieval.chains
        }

    async def rank(
        self, method: Method, corpus: str, question: str, k: int, deadline: Deadline, texts: bool,
        route_reply: str | None = None,
    ) -> Ranking:  # fmt: skip
        """Rank in this replica's next batch (`route_reply`: an LLM router's reply); 503 at once when it could not
        start in time, 504 at the deadline."""
        lane = self.lanes[served_chain(method)]
        try:
            lane.admission.admit(deadline.at)
        except Overloaded as exc:
            raise Unavailable(f"overloaded: {exc}; retry", retry_after_s=exc.retry_after_s) from None
        try:
            query = Query(question, method.name, corpus, k, texts, deadline.at, route_reply=route_reply)
            return await asyncio.wait_for(lane.batcher.submit(query), deadline.left_s())
        except TimeoutError:
            raise GatewayTimeout(f"retrieval did not finish within {deadline.budget_s:g} s") from None
        except DeadlineExceeded as exc:
            raise GatewayTimeout(f"retrieval did not start within {deadline.budget_s:g} s ({exc})") from None
        finally:
            lane.admission.done()
