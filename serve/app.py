"""The application graph (`build_app`, the import path serve/config.yaml names) and `t2rag serve`'s foreground run."""

from __future__ import annotations

import logging
import re
import signal
import sys
import time
from types import FrameType
from typing import Any

import httpx
from ray import serve
from ray.serve.config import BackpressureConfig
from ray.serve.deployment import Application

from ray_jobs.common import init_ray
from ray_jobs.local_cluster import stop_local_cluster
from serve.generator import GeneratorDeployment
from serve.ingress import RAGIngress
from serve.settings import API_KEY_ENV, ServeSettings
from t2rag.config import RayConfig
from t2rag.errors import T2RagError
from t2rag.generation.registry import engine_of

log = logging.getLogger(__name__)

APP_NAME = "t2rag"
OBJECT_STORE_BYTES = 256 * 2**20
READY_TIMEOUT_S = 900.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class ServeStartError(T2RagError):
    """The application did not come up."""


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve's app builder: `import_path: serve.app:build_app` with the `ServeSettings` fields as args."""
    return compose(ServeSettings.parse(args))


def compose(settings: ServeSettings, generator: Application | None = None) -> Application:
    """Bind the deployments into one application; `generator` replaces the configured generator deployment. An
    engine's served backend (vLLM: Ray Serve LLM's deployment) is bound inside it, with no route of its own."""
    config = settings.run_config()
    methods = settings.served_methods(config)
    health = {
        "health_check_period_s": settings.health_check_period_s,
        "health_check_timeout_s": settings.health_check_timeout_s,
    }
    if generator is None and config.generator is not None:
        backend = engine_of(config.generator).served_backend(config.generator)
        generator = GeneratorDeployment.options(
            ray_actor_options={"num_cpus": settings.generator_cpus, "num_gpus": settings.generator_gpus},
            max_ongoing_requests=settings.generator_ongoing_requests,
            **health,
        ).bind(config.generator, backend() if backend else None)
    return RAGIngress.options(
        ray_actor_options={"num_cpus": settings.replica_cpus, "num_gpus": settings.retrieval_gpus},
        **ingress_scaling(settings),
        **health,
    ).bind(config, settings, [m.name for m in methods], generator)


def ingress_scaling(settings: ServeSettings) -> dict[str, Any]:
    """The ingress deployment's replicas and queue bounds: beyond `max_ongoing_requests` per replica the proxy
    queues up to `max_queued_requests` and answers the rest 503 with Retry-After at once."""
    scaling: dict[str, Any] = {
        "max_ongoing_requests": settings.max_ongoing_requests,
        "max_queued_requests": settings.max_queued_requests,
        "backpressure_config": BackpressureConfig(status_code=503, retry_after_s=settings.retry_after_s),
    }
    if settings.autoscaling is None:
        scaling["num_replicas"] = settings.replicas
    else:
        scaling["num_replicas"] = "auto"
        scaling["autoscaling_config"] = settings.autoscaling.model_dump()
    return scaling


def run_foreground(
    config_path: str | None,
    data: str | None,
    host: str,
    port: int,
    generator: str | None,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> int:
    """`t2rag serve`: start Ray and the app on host:port, print the URL once every deployment is ready, and block
    until Ctrl-C or SIGTERM; then stop everything it started."""
    import ray

    settings = ServeSettings.parse({"config": config_path, "data": data, "generator": generator})
    config = settings.run_config()
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    # A bad engine config fails here, before anything starts.
    backend = config.generator is not None and engine_of(config.generator).served_backend(config.generator)
    # Binding needs no Ray, so a bad config fails here; a served backend's builder (Serve LLM's) starts a Ray of its
    # own, so an app with one is bound once the local cluster below is up.
    app = None if backend else compose(settings)
    if host not in LOOPBACK_HOSTS:
        guarded = "" if settings.api_key is not None else f"; set {API_KEY_ENV} to require an API key"
        warning = f"t2rag: warning: listening on {host} exposes the API to the network{guarded} (see README)"
        print(warning, file=sys.stderr)
    previous = signal.getsignal(signal.SIGTERM)
    started_ray = not ray.is_initialized()
    try:
        if started_ray:  # RAY_ADDRESS if set, else a local cluster on loopback (with its reaper)
            init_ray(RayConfig(object_store_memory=OBJECT_STORE_BYTES))  # logical CPUs: ray_jobs' default
        signal.signal(signal.SIGTERM, _interrupt)  # after ray.init, which installs its own handler
        app = app or compose(settings)
        serve.start(http_options={"host": host, "port": port})
        try:
            serve.run(app, name=APP_NAME, route_prefix="/", blocking=False)
        except RuntimeError as exc:
            raise ServeStartError(f"the app did not start: {start_failure(str(exc))}") from exc
        wait_until_ready(f"http://{local}:{port}", ready_timeout_s)
        print(f"t2rag: serving on http://{host}:{port} (API docs at /docs); press Ctrl-C to stop", file=sys.stderr)
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("t2rag: shutting down", file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the shutdown short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if started_ray:
            if ray.is_initialized():
                serve.shutdown()
            stop_local_cluster()
        elif ray.is_initialized():  # someone else's Ray (and maybe Serve): remove only what this command deployed
            serve.delete(APP_NAME)
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return 0


def wait_until_ready(url: str, timeout_s: float) -> None:
    """Poll the app's /ready route until every deployment is up; a failed or slow start is a ServeStartError."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{url}/ready", timeout=5.0)
            if response.status_code == 200:
                return
            body = response.json()
            last = ", ".join(f"{name} {state}" for name, state in body.get("deployments", {}).items()) or last
            if body.get("status") == "unhealthy":
                raise ServeStartError(f"the app did not start: {last}")
        except (httpx.HTTPError, ValueError) as exc:
            last = f"{type(exc).__name__}"
        time.sleep(0.5)
    raise ServeStartError(f"the app was not ready within {timeout_s:g} s ({last})")


def start_failure(text: str) -> str:
    """One line from Serve's deployment failure: its first line plus the replica's own exception, when it shows."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    causes = [line for line in lines if _EXCEPTION_LINE.match(line)]
    first = lines[0] if lines else "unknown error"
    return f"{first} ({causes[-1]})" if causes and causes[-1] != first else first


_EXCEPTION_LINE = re.compile(r"^[\w.]+(Error|Exception): \S")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
