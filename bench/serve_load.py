"""Loopback load on the served `/retrieve`, beside a trivial Serve route measured in the same run.

It starts a local Ray and two applications: the t2rag app (retrieval only, one subset of the bundled sample) and a
`floor` app whose one route parses the same request body and answers an empty ranking, with the same replica size:
the least any Serve route costs on this machine. Then, per route (floor first, then each method), it sends up to
--requests POST /retrieve requests at each concurrency level (default 1, 8, 32; a level also stops after
--level-cap-s seconds) and prints p50/p95/p99 latency, requests/s, how many answered 200, 503 or otherwise, and
where the server says the time went (its `Server-Timing` header, medians; `outside` is the client's latency minus
the server's total: the HTTP proxy, the hop to the replica and the client).

A closed-loop client that gets a 503 waits its Retry-After before the next request, as a well-behaved client does.

Then --mixed: the methods alternated in one load, each reported on its own line (marked *).

Last, the overload: for --overload-s seconds it offers --overload-factor times the method's rate at concurrency 8
as an open loop (each request due on schedule, whatever came back; at most --overload-inflight out at once, the
rest not sent and counted), with `X-Timeout-Ms` set to --deadline-ms, and
prints the share of 200/503/504 answers, the latency of the 200s, the slowest answer of any kind, how many came
back after their deadline, and how long after the load stopped the p50 at concurrency 8 was back within 1.25x of
its value before. `late` counts answers of any kind more than 10% past the deadline.

With --chat: instead, the answering routes with the default generator (SmolLM2-135M, llama.cpp) and bm25: at
--chat-levels (default 1 and 4) concurrent clients, each asking --chat-requests questions in turn, /answer's latency
beside /v1/chat/completions streamed: its time to first token (the first chunk with answer text) and to the last.

Usage: python bench/serve_load.py [--methods bm25,base] [--requests 300] [--levels 1,8,32]
       python bench/serve_load.py --chat [--chat-levels 1,4] [--chat-requests 8]
"""

import argparse
import asyncio
import math
import os
import socket
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from serve.schemas import RetrieveRequest  # noqa: E402  (module level: FastAPI resolves the floor route's annotation here)

FLOOR = "floor"
FLOOR_PREFIX = "/floor"
RECOVERY_RATIO = 1.25
LATE_RATIO = 1.1  # an answer this far past its deadline is late (a 504 at the deadline crosses the proxy after it)


@dataclass
class Outcome:
    status: int
    latency_s: float
    method: str
    timing: dict[str, float] = field(default_factory=dict)  # Server-Timing, milliseconds
    retry_after_s: float = 0.0


@dataclass
class Level:
    outcomes: list[Outcome]
    wall_s: float

    def ok(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == 200]

    def count(self, status: int) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def rate(self) -> float:
        return len(self.ok()) / self.wall_s if self.wall_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        ok = [o.latency_s for o in self.ok()]
        return float(np.percentile(ok, q) * 1000) if ok else float("nan")

    def breakdown(self) -> str:
        ok = self.ok()
        names = dict.fromkeys(name for o in ok for name in o.timing)
        parts = [f"{name} {statistics.median(o.timing.get(name, 0.0) for o in ok):.1f}" for name in names]
        if "total" in names:
            outside = statistics.median(o.latency_s * 1000 - o.timing.get("total", 0.0) for o in ok)
            parts.append(f"outside {outside:.1f}")
        return ", ".join(parts)


def level_row(name: str, concurrency: int, level: Level, floor_p50_ms: float) -> str:
    """One line of the closed-loop table (the header is printed in main)."""
    p50 = level.percentile_ms(50)
    other = len(level.outcomes) - level.count(200) - level.count(503)
    return (
        f"{name:10} {concurrency:4d} {level.count(200):5d} {level.count(503):4d} {other:5d} {p50:7.1f} "
        f"{level.percentile_ms(95):7.1f} {level.percentile_ms(99):7.1f} {level.rate:7.1f} "
        f"{p50 / floor_p50_ms:9.2f}  {level.breakdown()}"
    )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=None, help="data source (default: the bundled sample)")
    p.add_argument("--subset", default="FinQA", help="the subset searched (default FinQA)")
    p.add_argument("--methods", default="bm25,base")
    p.add_argument("--mixed", default="bm25+base", help="methods alternated in one load, each reported ('' skips)")
    p.add_argument("--levels", default="1,8,32", help="comma-separated concurrency levels")
    p.add_argument("--requests", type=int, default=300, help="requests per level (at most)")
    p.add_argument("--level-cap-s", type=float, default=20.0, help="stop a level after this many seconds")
    p.add_argument("--questions", type=int, default=300, help="distinct real questions cycled through")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--overload-factor", type=float, default=4.0, help="0 skips the overload test")
    p.add_argument("--overload-s", type=float, default=8.0)
    p.add_argument("--deadline-ms", type=int, default=1000, help="X-Timeout-Ms of the overload requests")
    p.add_argument("--overload-inflight", type=int, default=128, help="most overload requests out at once")
    p.add_argument("--cpus", type=int, default=4, help="logical CPUs of the local Ray")
    p.add_argument("--chat", action="store_true", help="measure /answer and the streamed chat route instead")
    p.add_argument("--chat-levels", default="1,4", help="concurrency levels of --chat")
    p.add_argument("--chat-requests", type=int, default=8, help="questions each --chat client asks")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a serve.settings.ServeSettings field for the app, e.g. replica_cpus=2 or max_queue_wait_s=0.3",
    )
    return p.parse_args()


def server_timing(header: str | None) -> dict[str, float]:
    """`name;dur=1.2, other;dur=3` as {name: milliseconds}."""
    out: dict[str, float] = {}
    for part in (header or "").split(","):
        name, _, params = part.strip().partition(";")
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "dur" and name:
                out[name] = float(value)
    return out


async def send(session: aiohttp.ClientSession, url: str, body: dict, headers: dict | None = None) -> Outcome:
    sent = time.perf_counter()
    try:
        async with session.post(url, json=body, headers=headers) as response:
            await response.read()
            timing = server_timing(response.headers.get("Server-Timing"))
            retry_after = float(response.headers.get("Retry-After", 0))
            return Outcome(response.status, time.perf_counter() - sent, body["method"], timing, retry_after)
    except (TimeoutError, aiohttp.ClientError):
        return Outcome(0, time.perf_counter() - sent, body["method"])


def bodies(method: str, questions: list[str], k: int):
    """Request bodies cycling through the questions; `a+b` alternates the methods a and b."""
    methods = method.split("+")
    i = 0
    while True:
        yield {"question": questions[i % len(questions)], "method": methods[i % len(methods)], "k": k}
        i += 1


async def closed_loop(url: str, method: str, questions: list[str], args, c: int, n: int, cap_s: float) -> Level:
    """c clients, each sending its next request when the last one answered (or, after a 503, after its
    Retry-After, as a well-behaved client does)."""
    outcomes: list[Outcome] = []
    source = bodies(method, questions, args.k)
    connector = aiohttp.TCPConnector(limit=c)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        await send(session, url, next(source))  # warm the connection and the route
        deadline = time.perf_counter() + cap_s
        issued = 0

        async def client() -> None:
            nonlocal issued
            while issued < n and time.perf_counter() < deadline:
                issued += 1
                outcome = await send(session, url, next(source))
                outcomes.append(outcome)
                if outcome.status == 503:
                    await asyncio.sleep(min(outcome.retry_after_s, max(deadline - time.perf_counter(), 0)))

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(c)))
        return Level(outcomes, time.perf_counter() - started)


async def open_loop(url: str, method: str, questions: list[str], args, rate: float) -> tuple[Level, int]:
    """Requests due at `rate` per second for --overload-s seconds, whatever the server answers; at most
    --overload-inflight at once, and one due while that many are out is not sent (counted, as k6 counts
    dropped iterations), so the client's own queue never adds to a latency. Returns the level and that count."""
    source = bodies(method, questions, args.k)
    headers = {"X-Timeout-Ms": str(args.deadline_ms)}
    connector = aiohttp.TCPConnector(limit=args.overload_inflight)
    unsent = 0
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        tasks: list[asyncio.Task] = []
        in_flight = 0

        async def one(body: dict) -> Outcome:
            nonlocal in_flight
            try:
                return await send(session, url, body, headers)
            finally:
                in_flight -= 1

        started = time.perf_counter()
        for i in range(int(rate * args.overload_s)):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if in_flight >= args.overload_inflight:
                unsent += 1
                continue
            in_flight += 1
            tasks.append(asyncio.create_task(one(next(source))))
        outcomes = list(await asyncio.gather(*tasks))
        return Level(outcomes, time.perf_counter() - started), unsent


async def recovery_s(url: str, method: str, questions: list[str], args, p50_before_ms: float) -> float:
    """Seconds after the overload until a 1-second window at concurrency 8 has its p50 back near the old one."""
    started = time.perf_counter()
    while time.perf_counter() - started < 60:
        window = await closed_loop(url, method, questions, args, 8, 10_000, 1.0)
        if window.ok() and window.percentile_ms(50) <= RECOVERY_RATIO * p50_before_ms:
            return time.perf_counter() - started
    return float("inf")


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of the processes a request crosses: Serve's HTTP proxy, each app's replica, this client."""
    import psutil

    roles = {"ProxyActor": "proxy", "ServeReplica:t2rag": "replica", "ServeReplica:floor": "replica"}
    out: dict[str, float] = {}
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        role = "client" if process.pid == os.getpid() else next((r for k, r in roles.items() if k in command), None)
        if role is not None:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            out[role] = out.get(role, 0.0) + times.user + times.system
    return out


def cpu_per_request(before: dict[str, float], after: dict[str, float], requests: int) -> str:
    """Milliseconds of CPU per request in each role over a level (both apps' replicas idle but the one loaded)."""
    return ", ".join(f"{role} {1000 * (after[role] - before.get(role, 0.0)) / max(requests, 1):.1f}" for role in after)


def deploy_floor(replica_cpus: float):
    """A Serve route that does nothing but parse the request and answer: the floor of this machine."""
    from fastapi import FastAPI
    from ray import serve

    api = FastAPI()

    @serve.deployment(name="Floor", ray_actor_options={"num_cpus": replica_cpus}, max_ongoing_requests=256)
    @serve.ingress(api)
    class Floor:
        @api.post("/retrieve")
        async def retrieve(self, body: RetrieveRequest) -> dict:
            return {"method": body.method, "corpus": body.corpus or "", "contexts": []}

    serve.run(Floor.bind(), name=FLOOR, route_prefix=FLOOR_PREFIX)


async def answer_once(session: aiohttp.ClientSession, base: str, question: str) -> tuple[float, float]:
    """(time to the answer, the same) for one /answer request."""
    sent = time.perf_counter()
    async with session.post(f"{base}/answer", json={"question": question, "method": "bm25"}) as response:
        await response.read()
        assert response.status == 200, response.status
    took = time.perf_counter() - sent
    return took, took


async def chat_once(session: aiohttp.ClientSession, base: str, question: str) -> tuple[float, float]:
    """(time to the first chunk with answer text, time to the last) for one streamed chat completion."""
    body = {"model": "bm25", "messages": [{"role": "user", "content": question}], "stream": True}
    sent = time.perf_counter()
    first = None
    async with session.post(f"{base}/v1/chat/completions", json=body) as response:
        assert response.status == 200, response.status
        async for line in response.content:
            if first is None and line.startswith(b"data: {") and b'"content":"' in line and b'"content":""' not in line:
                first = time.perf_counter() - sent
    last = time.perf_counter() - sent
    return first if first is not None else last, last


async def chat_level(base: str, route, questions: list[str], clients: int, each: int) -> list[tuple[float, float]]:
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def client(offset: int) -> list[tuple[float, float]]:
            return [await route(session, base, questions[(offset * each + i) % len(questions)]) for i in range(each)]

        results = await asyncio.gather(*(client(c) for c in range(clients)))
    return [r for part in results for r in part]


def chat_bench(args, questions: list[str]) -> None:
    """--chat: /answer against the streamed chat route, same questions, same generator."""
    import ray
    from ray import serve

    from serve.app import compose
    from serve.settings import ServeSettings

    fields = {name: yaml.safe_load(value) for name, value in (item.split("=", 1) for item in args.set)}
    settings = ServeSettings.parse(
        {"data": args.data, "subsets": [args.subset], "methods": ["bm25"], "generation_timeout_s": 600} | fields
    )
    ray.init(num_cpus=args.cpus, include_dashboard=False, object_store_memory=256 * 2**20, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})  # fmt: skip
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(compose(settings), name="t2rag", route_prefix="/")
    base = f"http://127.0.0.1:{port}"
    generator = settings.run_config().generator.model
    print(f"generator {generator}; bm25, k=3; {os.cpu_count()} CPUs")
    print(f"{'route':22} {'conc':>4} {'n':>3} {'TTFT p50 s':>10} {'p50 s':>7} {'p95 s':>7} {'max s':>7}")
    asyncio.run(chat_level(base, answer_once, questions, 1, 1))  # warm-up: the engine's first prompt
    for c in [int(x) for x in args.chat_levels.split(",")]:
        for name, route in (("/answer", answer_once), ("/v1/chat/completions", chat_once)):
            times = asyncio.run(chat_level(base, route, questions, c, args.chat_requests))
            first = [t for t, _ in times]
            full = sorted(t for _, t in times)
            ttft = f"{statistics.median(first):10.2f}" if route is chat_once else f"{'-':>10}"
            print(f"{name:22} {c:4d} {len(full):3d} {ttft} {statistics.median(full):7.2f} "
                  f"{full[math.ceil(0.95 * len(full)) - 1]:7.2f} {full[-1]:7.2f}", flush=True)  # fmt: skip


def start(args) -> str:
    """Local Ray, the t2rag app and the floor app on a free loopback port; the base URL."""
    import ray
    from ray import serve

    from serve.app import compose
    from serve.settings import ServeSettings

    fields = dict(item.split("=", 1) for item in args.set)
    settings = ServeSettings.parse(
        {"data": args.data, "subsets": [args.subset], "methods": args.methods.split(","), "generator": "none"}
        | {name: yaml.safe_load(value) for name, value in fields.items()}
    )
    ray.init(
        num_cpus=args.cpus,
        include_dashboard=False,
        object_store_memory=256 * 2**20,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},  # replicas import t2rag and serve from here
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    started = time.perf_counter()
    serve.run(compose(settings), name="t2rag", route_prefix="/")
    deploy_floor(settings.replica_cpus)
    print(f"apps up on 127.0.0.1:{port} in {time.perf_counter() - started:.1f} s", flush=True)
    return f"http://127.0.0.1:{port}"


def main() -> None:
    args = parse_args()
    import ray
    from ray import serve

    from t2rag.data import load_questions

    rows = load_questions(args.data, [args.subset]).scored().column("question").to_pylist()
    questions = list(dict.fromkeys(rows))[: args.questions]
    levels = [int(x) for x in args.levels.split(",")]
    if args.chat:
        try:
            chat_bench(args, questions)
        finally:
            if ray.is_initialized():
                serve.shutdown()
                ray.shutdown()
        return
    print(f"{len(questions)} real {args.subset} questions, k={args.k}, {os.cpu_count()} CPUs", flush=True)
    try:
        base = start(args)
        routes = [(FLOOR, f"{base}{FLOOR_PREFIX}/retrieve")] + [
            (m, f"{base}/retrieve") for m in args.methods.split(",")
        ]
        print(
            f"{'route':10} {'conc':>4} {'200':>5} {'503':>4} {'other':>5} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} "
            f"{'req/s':>7} {'p50/floor':>9}  server timing (median ms) | CPU ms per request"
        )
        floor_p50: dict[int, float] = {}
        best: dict[str, tuple[float, float]] = {}
        for name, url in routes:
            method = "bm25" if name == FLOOR else name
            for c in levels:
                before = cpu_seconds()
                level = asyncio.run(closed_loop(url, method, questions, args, c, args.requests, args.level_cap_s))
                cpu = cpu_per_request(before, cpu_seconds(), len(level.outcomes))
                p50 = level.percentile_ms(50)
                if name == FLOOR:
                    floor_p50[c] = p50
                if c == 8 or name not in best:
                    best[name] = (level.rate, p50)
                print(level_row(name, c, level, floor_p50.get(c, float("nan"))), f"| {cpu}", flush=True)
        if args.mixed:
            for c in levels:
                level = asyncio.run(closed_loop(f"{base}/retrieve", args.mixed, questions, args, c, args.requests, 60))
                for method in args.mixed.split("+"):
                    part = Level([o for o in level.outcomes if o.method == method], level.wall_s)
                    print(level_row(method + "*", c, part, floor_p50.get(c, float("nan"))), flush=True)
            print(f"*: {args.mixed} alternated in one load (requests/s per method; the load's total is their sum)")
        if args.overload_factor > 0:
            print(
                f"\noverload: {args.overload_factor:g}x the rate at concurrency 8 for {args.overload_s:g} s, "
                f"deadline {args.deadline_ms} ms"
            )
            print(
                f"{'route':10} {'offered/s':>9} {'sent':>5} {'unsent':>6} {'200':>6} {'503':>6} {'504':>6} "
                f"{'other':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'late':>5} {'recovered in':>12}"
            )
            for name, url in routes[1:]:
                rate, p50_before = best[name]
                offered = args.overload_factor * rate
                level, unsent = asyncio.run(open_loop(url, name, questions, args, offered))
                n = len(level.outcomes)
                share = {s: 100.0 * level.count(s) / n for s in (200, 503, 504)}
                other = 100.0 - sum(share.values())
                slowest = max(o.latency_s for o in level.outcomes) * 1000
                late_by = Counter(
                    o.status for o in level.outcomes if o.latency_s * 1000 > LATE_RATIO * args.deadline_ms
                )
                late = sum(late_by.values())
                recovered = asyncio.run(recovery_s(url, name, questions, args, p50_before))
                print(
                    f"{name:10} {offered:9.0f} {n:5d} {unsent:6d} {share[200]:5.1f}% {share[503]:5.1f}% "
                    f"{share[504]:5.1f}% {other:5.1f}% {level.percentile_ms(50):7.1f} {level.percentile_ms(99):7.1f} "
                    f"{slowest:7.0f} {late:5d} {recovered:11.1f}s  late by status: {dict(late_by)}",
                    flush=True,
                )
    finally:
        if ray.is_initialized():
            serve.shutdown()
            ray.shutdown()


if __name__ == "__main__":
    main()
