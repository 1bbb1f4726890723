"""Prefix-affine routing across generator replicas: t2rag's own (rendezvous hashing of a prompt's leading part, as
`ray_jobs.generator_service.ServiceClient` routes with `generator.prefix_reuse`) against Ray Serve LLM's
`PrefixCacheAffinityRouter` (a prefix tree of every routed prompt, in an actor), on the answer prompts of a real
run: the oracle, bm25 and bm25_meta (top 3) over every question of the bundled dev sample, in the run's order.

For each router: the share of prompt characters a replica could take from its prefix cache (the longest prefix a
prompt shares with one that replica was sent before: an unbounded cache), the same past the system prompt (which
every answer shares, whatever the routing), the rows per replica, and the routing rate. Serve's router runs for
real (a Serve deployment of N replicas that only reports which replica it is, so the figures are the router's
own); least-busy routing in plan order (`prefix_reuse: false`: batches to alternating replicas) and one replica in
prefix order bound the shares from below and above.

    .venv-vllm/bin/python bench/prefix_routing.py [--replicas 2] [--json]

It needs vLLM installed (Ray Serve LLM's router imports it): `make vllm` builds `.venv-vllm`.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BATCH = 16  # rows per client batch, as `generator.batch_size` of the vLLM presets


@dataclass(frozen=True)
class Prompt:
    """A request as Serve LLM's router reads it (it looks for a `messages` attribute)."""

    messages: list[dict[str, str]]


def run_prompts(methods: list[str]) -> tuple[list[list[dict[str, str]]], list[list[dict[str, str]]]]:
    """The answer prompts of `methods` over the bundled sample, in the order a run with prefix reuse sends them
    (by subset and gold context, then question and method) and in plan order (the data's, question by question)."""
    import pyarrow.compute as pc

    from t2rag.config import load_config
    from t2rag.data.corpus import build_corpora
    from t2rag.data.load import load_questions
    from t2rag.pipeline.local import run_local
    from t2rag.prompts import Prompts
    from t2rag.run_folder.files import read_records

    questions = load_questions()
    corpora = build_corpora(questions)
    text = {cid: t for corpus in corpora.values() for cid, t in zip(corpus.context_ids, corpus.texts, strict=True)}
    table = questions.table
    rows = {r["id"]: r for r in table.select(["id", "subset", "question", "context_id"]).to_pylist()}
    ranked: dict[tuple[str, str], list[str]] = {}
    retrievers = [m for m in methods if m != "oracle"]
    if retrievers:
        with tempfile.TemporaryDirectory() as out:
            config = load_config(None, {"methods": retrievers, "retrieval_only": True, "retrieval": {"k": 3},
                                        "out": out})  # fmt: skip
            run_local(config)
            records = read_records(out, ["id", "method", "context_ids"])
            for r in records.filter(pc.is_valid(records.column("context_ids"))).to_pylist():
                ranked[(r["method"], r["id"])] = r["context_ids"]
    for qid, row in rows.items():
        if "oracle" in methods:
            ranked[("oracle", qid)] = [row["context_id"]]
    prompts = Prompts()
    position = {qid: i for i, qid in enumerate(rows)}
    planned = sorted(ranked, key=lambda mq: (position[mq[1]], methods.index(mq[0])))
    by_prefix = sorted(ranked, key=lambda mq: (rows[mq[1]]["subset"], rows[mq[1]]["context_id"], mq[1], mq[0]))

    def answer(method: str, qid: str) -> list[dict[str, str]]:
        return list(prompts.answer(rows[qid]["question"], [text[c] for c in ranked[(method, qid)]]))

    return [answer(*mq) for mq in by_prefix], [answer(*mq) for mq in planned]


def flat(messages: list[dict[str, str]]) -> str:
    """The prompt's text in engine order (what a prefix cache matches on)."""
    return "\n".join(m["content"] for m in messages)


def user_text(messages: list[dict[str, str]]) -> str:
    """The prompt without the system prompt every answer shares (what routing can win or lose)."""
    return messages[-1]["content"]


def reusable_share(texts: list[str], replicas: list[int]) -> float:
    """Share of characters each prompt shares with the longest-matching earlier prompt of its replica."""
    seen: dict[int, list[str]] = {}
    reused = 0
    for text, replica in zip(texts, replicas, strict=True):
        earlier = seen.setdefault(replica, [])
        at = bisect.bisect_left(earlier, text)
        best = max((_common(text, earlier[i]) for i in (at - 1, at) if 0 <= i < len(earlier)), default=0)
        reused += best
        earlier.insert(at, text)
    return reused / sum(len(t) for t in texts)


def _common(a: str, b: str) -> int:
    """Length of the common prefix (binary search over slice comparisons, which run in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def rendezvous(prompts: list[list[dict[str, str]]], replicas: int) -> tuple[list[int], float]:
    """t2rag's routing decision for each prompt with the replicas equally loaded, and decisions per second."""
    from ray_jobs.generator_service import ServiceClient
    from t2rag.generation.prefix import route_key

    client = ServiceClient([None] * replicas, timeout_s=1, attempts=1, by_prefix=True)
    loads = dict.fromkeys(range(replicas), 0)
    started = time.perf_counter()
    chosen = [client._replica_for(route_key(p), loads, 0) for p in prompts]
    return chosen, len(prompts) / (time.perf_counter() - started)


def least_busy(prompts: list[list[dict[str, str]]], replicas: int) -> list[int]:
    """Batches of `BATCH` rows to the replicas in turn (all equally fast), as without prefix reuse."""
    return [(i // BATCH) % replicas for i in range(len(prompts))]


def serve_router(prompts: list[list[dict[str, str]]], replicas: int, in_flight: int = 64) -> tuple[list[int], float]:
    """Serve LLM's PrefixCacheAffinityRouter for real: each prompt one request, `in_flight` at a time; the
    replica each one reached, and requests per second."""
    import ray
    from ray import serve
    from ray.serve.config import RequestRouterConfig
    from ray.serve.llm.request_router import PrefixCacheAffinityRouter

    @serve.deployment(
        num_replicas=replicas,
        max_ongoing_requests=in_flight,
        ray_actor_options={"num_cpus": 0},
        request_router_config=RequestRouterConfig(request_router_class=PrefixCacheAffinityRouter),
    )
    class Where:
        def __init__(self):
            self.replica = serve.get_replica_context().replica_id.unique_id

        async def __call__(self, prompt: Prompt) -> str:
            return self.replica

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        handle = serve.run(Where.bind(), name="prefix-routing", route_prefix=None)
        handle.remote(Prompt([{"role": "user", "content": "warm up"}])).result()
        started = time.perf_counter()
        pending: deque = deque()
        names: list[str] = []
        for p in prompts:
            pending.append(handle.remote(Prompt(p)))
            if len(pending) >= in_flight:
                names.append(pending.popleft().result())
        names += [r.result() for r in pending]
        rate = len(prompts) / (time.perf_counter() - started)
    finally:
        serve.shutdown()
        ray.shutdown()
    index = {name: i for i, name in enumerate(sorted(set(names)))}
    return [index[n] for n in names], rate


def routing_figures(name: str, prompts: list[list[dict[str, str]]], chosen: list[int], rate: float | None) -> dict:
    rows = Counter(chosen)
    return {
        "router": name,
        "reusable_share": round(reusable_share([flat(p) for p in prompts], chosen), 4),
        "reusable_share_past_system": round(reusable_share([user_text(p) for p in prompts], chosen), 4),
        "rows_per_replica": [rows[r] for r in sorted(rows)],
        "routing_per_s": round(rate, 1) if rate else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--methods", default="oracle,bm25,bm25_meta")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    prompts, planned = run_prompts(args.methods.split(","))
    hashed, hashed_rate = rendezvous(prompts, args.replicas)
    served, served_rate = serve_router(prompts, args.replicas)
    results = {
        "prompts": len(prompts),
        "replicas": args.replicas,
        "routers": [
            routing_figures("one replica, prefix order (bound)", prompts, [0] * len(prompts), None),
            routing_figures("least busy, plan order (reuse off)", planned, least_busy(planned, args.replicas), None),
            routing_figures("t2rag rendezvous, prefix order", prompts, hashed, hashed_rate),
            routing_figures("Serve PrefixCacheAffinityRouter, prefix order", prompts, served, served_rate),
        ],
    }
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"{results['prompts']} answer prompts ({args.methods}) over {args.replicas} replicas")
    print(f"{'router':46} {'reusable %':>10} {'past system %':>13} {'rows per replica':>17} {'routed/s':>9}")
    for r in results["routers"]:
        rate = f"{r['routing_per_s']:,.0f}" if r["routing_per_s"] else "-"
        share, past = 100 * r["reusable_share"], 100 * r["reusable_share_past_system"]
        rows = "/".join(map(str, r["rows_per_replica"]))
        print(f"{r['router']:46} {share:10.1f} {past:13.1f} {rows:>17} {rate:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
