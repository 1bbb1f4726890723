"""The HTTP ingress: validates requests, ranks contexts in this replica (serve/retrieval.py: concurrent requests
batched by serve/batcher.py, one queue per stage chain, refused at once when they could not be answered in time),
runs the answering stages (`read_contexts`, `answer_prompts`, `parse_answers`) on the one-row batch of a request,
and calls the generator deployment through its handle.

Every request has a deadline: the route's configured timeout, shortened by the request's `X-Timeout-Ms` header.
Retrieval and answer responses carry a `Server-Timing` header with the seconds spent per step, in milliseconds."""

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import pyarrow as pa
from fastapi import FastAPI, Header, Response
from fastapi.responses import JSONResponse
from ray import serve
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle, DeploymentResponse

from serve.admission import Admission, Overloaded
from serve.batcher import Batcher
from serve.errors import (
    BadGateway,
    BadRequest,
    GatewayTimeout,
    Unavailable,
    Unprocessable,
    install_error_handlers,
    install_guard,
)
from serve.retrieval import DeadlineExceeded, Query, Ranking, RetrievalService
from serve.schemas import (
    MAX_BODY_BYTES,
    MAX_K,
    MAX_TIMEOUT_MS,
    AnswerRequest,
    AnswerResponse,
    ChatChoice,
    ChatMessage,
    Context,
    ErrorResponse,
    GenerateRequest,
    GenerateResponse,
    HealthResponse,
    MethodInfo,
    MethodsResponse,
    ReadyResponse,
    RetrieveRequest,
    RetrieveResponse,
    Timings,
    Usage,
)
from serve.settings import ServeSettings, default_corpus
from t2rag.config import RunConfig
from t2rag.errors import T2RagError
from t2rag.generation.base import REJECTED, ChatRequest, SamplingParams, is_rejected
from t2rag.generation.requests import REQUEST_COLUMNS, request_row
from t2rag.methods import METHODS, Method
from t2rag.resources import Resources
from t2rag.stages.answer import AnswerPrompts, ParseAnswers, ReadContexts

log = logging.getLogger(__name__)
T = TypeVar("T")

api = FastAPI(
    title="t2rag",
    version="0.1.0",
    description="Retrieval and numerical question answering over financial reports (T2-RAGBench), on Ray Serve. "
    'Every error is a status code with a one-line JSON reason, `{"error": "..."}`.',
)
install_error_handlers(api)

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in [
        (400, "bad input: unknown method or subset, unparseable JSON, ..."),
        (413, "request body too large"),
        (422, "a field is missing, of the wrong type or out of range"),
        (503, "overloaded, or a deployment has no live replica right now: retry after `Retry-After` seconds"),
        (504, "the request's deadline passed (its X-Timeout-Ms, else the route's timeout)"),
    ]
}
_GENERATION_ERRORS = {
    **_ERRORS,
    422: {
        "model": ErrorResponse,
        "description": "a field is invalid, or the generator cannot run the request (e.g. the prompt is longer "
        "than the model's context window)",
    },
    502: {"model": ErrorResponse, "description": "the generator failed"},
}
_UNAVAILABLE = (RayActorError, ActorUnavailableError, DeploymentUnavailableError, BackPressureError)


# Module-level helpers come before the deployment class: Serve pickles the class when it is decorated.


class Deadline:
    """When a request stops being worth answering: its route's timeout, or sooner by its X-Timeout-Ms header."""

    def __init__(self, timeout_s: float, header_ms: int | None):
        self.budget_s = timeout_s if header_ms is None else min(timeout_s, header_ms / 1000)
        self.started = time.monotonic()
        self.at = self.started + self.budget_s

    def left_s(self) -> float:
        return max(self.at - time.monotonic(), 0.0)


async def _call(response: DeploymentResponse, deadline: Deadline, what: str) -> Any:
    """Await a handle call until the request's deadline, mapping replica faults to 503/504 and t2rag errors to 400."""
    try:
        return await asyncio.wait_for(_awaited(response), deadline.left_s())
    except TimeoutError:
        response.cancel()
        raise GatewayTimeout(f"the {what} did not answer within {deadline.budget_s:g} s") from None
    except _UNAVAILABLE as exc:
        log.warning("%s unavailable: %s", what, type(exc).__name__)
        raise Unavailable(f"the {what} is unavailable right now (a replica may be restarting); retry") from None
    except RayTaskError as exc:
        if isinstance(exc.cause, T2RagError):
            raise BadRequest(str(exc.cause)) from None
        raise


@dataclass(frozen=True)
class Lane:
    """The queue one stage chain's retrieval requests wait in: its batches and its admission control."""

    batcher: Batcher[Query, Ranking]
    admission: Admission


TimeoutHeader = Annotated[
    int | None,
    Header(
        alias="X-Timeout-Ms",
        ge=1,
        le=MAX_TIMEOUT_MS,
        description="the longest the client waits, in milliseconds: the server answers 504 then (a retrieval it could "
        "not answer by then is refused at once, 503); default and upper bound: the route's configured timeout",
    ),
]


def server_timing(seconds: dict[str, float]) -> str:
    """A Server-Timing header value: each step's duration in milliseconds."""
    return ", ".join(f"{name};dur={1000 * value:.2f}" for name, value in seconds.items())


def app_readiness(app_name: str) -> ReadyResponse:
    """The Serve controller's view of one application: ready only when it runs and every deployment is healthy."""
    app = serve.status().applications.get(app_name)
    if app is None:
        return ReadyResponse(status="starting", deployments={})
    deployments = {name: str(d.status.value) for name, d in app.deployments.items()}
    if str(app.status.value) == "RUNNING" and all(s == "HEALTHY" for s in deployments.values()):
        return ReadyResponse(status="ready", deployments=deployments)
    failed = str(app.status.value) == "DEPLOY_FAILED" or "UNHEALTHY" in deployments.values()
    return ReadyResponse(status="unhealthy" if failed else "starting", deployments=deployments)


async def _awaited(response: Awaitable[T]) -> T:
    return await response


def _usage(generation: dict[str, Any]) -> Usage:
    prompt, completion = generation["prompt_tokens"] or 0, generation["completion_tokens"] or 0
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


@serve.deployment(name="Ingress")
@serve.ingress(api)
class RAGIngress:
    """Ranks contexts for /retrieve and /answer here, calls the generator for /answer and /generate; /health, /ready
    and /methods answer locally."""

    def __init__(
        self, config: RunConfig, settings: ServeSettings, methods: list[str], generator: DeploymentHandle | None
    ):
        self.settings = settings
        self.resources = Resources(config)
        self.read_contexts = ReadContexts(self.resources)
        self.answer_prompts = AnswerPrompts(self.resources)
        self.parse_answers = ParseAnswers(self.resources)
        self.methods = {name: METHODS[name] for name in methods}
        self.generator = generator
        self.app_name = serve.get_replica_context().app_name
        self.subsets = self.resources.questions.subsets
        self.default_corpus = default_corpus(self.subsets)
        self.retrieval = RetrievalService(self.resources, list(self.methods.values()))
        self.corpora = self.retrieval.corpora
        for name in self.corpora:  # build the corpora now: /answer reads context texts from them
            self.resources.corpus(name)
        self.retrieval.build()
        # One lane per stage chain, each with its own batches and drain rate: a lexical search never waits behind
        # the encoding of a batch of dense queries, nor is it refused for their pace.
        self.lanes = {
            chain: Lane(
                Batcher(self.retrieval.rank, settings.max_batch_size),
                Admission(settings.max_ongoing_requests, settings.max_queue_wait_s, settings.retry_after_s),
            )
            for chain in self.retrieval.chains
        }

    def __serve_build_asgi_app__(self) -> FastAPI:
        """Serve's hook after __init__: this replica's app, guarded with the app's key and body limits."""
        app: FastAPI = self.app  # type: ignore[attr-defined]  # the copy of `api` the ingress wrapper holds
        install_guard(app, self.settings.guard(MAX_BODY_BYTES))
        return app

    # -- routes --------------------------------------------------------------------------------------------
    @api.get("/health", response_model=HealthResponse, summary="Liveness of the ingress (see /ready)")
    async def health(self) -> HealthResponse:
        return HealthResponse(status="ok")

    @api.get(
        "/ready",
        response_model=ReadyResponse,
        responses={503: {"model": ReadyResponse, "description": "some deployment is starting or unhealthy"}},
        summary="Readiness: every deployment of the app is running",
    )
    async def ready(self) -> JSONResponse:
        readiness = await asyncio.to_thread(app_readiness, self.app_name)
        return JSONResponse(readiness.model_dump(), status_code=200 if readiness.status == "ready" else 503)

    @api.get("/methods", response_model=MethodsResponse, summary="The served methods and loaded subsets")
    async def list_methods(self) -> MethodsResponse:
        return MethodsResponse(
            methods=[self._describe(m) for m in self.methods.values()],
            subsets=self.subsets,
            default_subset=self.default_corpus,
            generator=self._model_name(),
            max_k=MAX_K,
        )

    @api.post("/retrieve", response_model=RetrieveResponse, responses=_ERRORS, summary="Top-k contexts")
    async def retrieve(
        self, body: RetrieveRequest, response: Response, timeout_ms: TimeoutHeader = None
    ) -> RetrieveResponse:
        deadline = Deadline(self.settings.retrieval_timeout_s, timeout_ms)
        method = self._method(body.method, retrieving=True)
        corpus = self._corpus(body.subset)
        ranking = await self._retrieve(method, corpus, body.question, body.k, deadline, texts=body.with_text)
        response.headers["Server-Timing"] = server_timing(
            {**ranking.seconds, "total": time.monotonic() - deadline.started}
        )
        return RetrieveResponse(method=method.name, subset=corpus, contexts=[Context(**c) for c in ranking.contexts])

    @api.post("/answer", response_model=AnswerResponse, responses=_GENERATION_ERRORS, summary="Retrieve and answer")
    async def answer(self, body: AnswerRequest, response: Response, timeout_ms: TimeoutHeader = None) -> AnswerResponse:
        started = time.perf_counter()
        deadline = Deadline(self.settings.generation_timeout_s, timeout_ms)
        method = self._method(body.method, retrieving=False)
        corpus = self._corpus(body.subset)
        generator = self._require_generator()
        if body.context_id is not None and method.reads != "gold":
            raise BadRequest(f"context_id applies only to method oracle, not {method.name}")
        row: dict[str, Any] = {"subset": corpus, "method": method.name, "question": body.question, "k": body.k}
        ranked: list[dict[str, Any]] = []
        seconds: dict[str, float] = {}
        if method.retrieves:
            ranking = await self._retrieve(method, corpus, body.question, body.k, deadline, texts=False)
            ranked, seconds = ranking.contexts, ranking.seconds
            row["context_ids"] = [c["context_id"] for c in ranked]
        elif method.reads == "gold":
            gold = self._gold_context(body.context_id, corpus)
            ranked = [{"context_id": gold.context_id, "subset": gold.subset, "score": None}]
            row["gold_context"] = gold.text
        batch = self.answer_prompts(self.read_contexts(pa.Table.from_pylist([row])))
        texts = batch.column("reader_texts")[0].as_py()
        contexts = [Context(**c, text=text) for c, text in zip(ranked, texts, strict=True)]
        retrieved = time.perf_counter()
        generation = await self._generate(generator, batch.select(list(REQUEST_COLUMNS)).to_pylist()[0], deadline)
        generated = time.perf_counter()
        response.headers["Server-Timing"] = server_timing(
            {**seconds, "generate": generated - retrieved, "total": generated - started}
        )
        for name, value in generation.items():
            batch = batch.append_column(name, pa.array([value]))
        record = self.parse_answers(batch.append_column("reference", pa.nulls(1, pa.float64()))).to_pylist()[0]
        prediction = record["prediction"]
        return AnswerResponse(
            method=method.name,
            subset=corpus,
            prediction=prediction if prediction is not None and math.isfinite(prediction) else None,
            prediction_source=record["prediction_source"],
            formula=record["formula"],
            reasoning_steps=record["reasoning_steps"],
            json_ok=bool(record["json_ok"]),
            formula_ok=bool(record["formula_ok"]),
            raw_output=generation["raw_output"],
            contexts=contexts,
            usage=_usage(generation),
            timings=Timings(
                retrieval_s=round(retrieved - started, 4),
                generation_s=round(generated - retrieved, 4),
                total_s=round(time.perf_counter() - started, 4),
            ),
        )

    @api.post("/generate", response_model=GenerateResponse, responses=_GENERATION_ERRORS, summary="Chat completion")
    async def generate(self, body: GenerateRequest, timeout_ms: TimeoutHeader = None) -> GenerateResponse:
        deadline = Deadline(self.settings.generation_timeout_s, timeout_ms)
        generator = self._require_generator()
        params = SamplingParams(temperature=body.temperature, top_p=body.top_p, max_tokens=body.max_tokens)
        request = ChatRequest(tuple({"role": m.role, "content": m.content} for m in body.messages), params)
        started = time.perf_counter()
        generation = await self._generate(generator, request_row(request), deadline)
        return GenerateResponse(
            id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
            created=int(time.time()),
            model=self._model_name() or "unknown",
            choices=[
                ChatChoice(
                    index=0,
                    message=ChatMessage(role="assistant", content=generation["raw_output"]),
                    finish_reason="stop",
                )
            ],
            usage=_usage(generation),
            text=generation["raw_output"],
            generation_s=round(time.perf_counter() - started, 4),
        )

    # -- helpers -------------------------------------------------------------------------------------------
    def _method(self, name: str, retrieving: bool) -> Method:
        method = self.methods.get(name)
        if method is None:
            known = "known but not served here" if name in METHODS else "unknown"
            raise BadRequest(f"method '{name}' is {known} (served: {', '.join(self._names(retrieving))})")
        if retrieving and not method.retrieves:
            raise BadRequest(
                f"method '{name}' does not retrieve; use /answer (retrieving: {', '.join(self._names(True))})"
            )
        return method

    def _names(self, retrieving: bool) -> list[str]:
        return [n for n, m in self.methods.items() if m.retrieves or not retrieving]

    def _corpus(self, subset: str | None) -> str:
        if subset is None:
            return self.default_corpus
        if subset not in self.corpora:
            raise BadRequest(f"unknown subset '{subset}' (loaded: {', '.join(self.corpora)})")
        return subset

    def _require_generator(self) -> DeploymentHandle:
        if self.generator is None:
            raise BadRequest("this app serves no generator; /answer and /generate are unavailable")
        return self.generator

    def _model_name(self) -> str | None:
        generator = self.resources.config.generator
        return generator.model if generator is not None and self.generator is not None else None

    def _describe(self, method: Method) -> MethodInfo:
        return MethodInfo(
            name=method.name,
            description=method.description,
            retrieves=method.retrieves,
            needs_generator=not method.retrieves or method.retrieval_needs_generator,
            needs_context_id=method.reads == "gold",
            endpoints=["/retrieve", "/answer"] if method.retrieves else ["/answer"],
        )

    def _gold_context(self, context_id: str | None, corpus: str) -> Context:
        if context_id is None:
            raise BadRequest("method oracle reads a given gold context: pass its context_id")
        docs = self.resources.corpus(corpus)
        position = docs.positions.get(context_id)
        if position is None:
            raise BadRequest(f"unknown context_id '{context_id}' in corpus {corpus}")
        return Context(context_id=context_id, subset=docs.subsets[position], score=None, text=docs.texts[position])

    async def _retrieve(
        self, method: Method, corpus: str, question: str, k: int, deadline: Deadline, texts: bool
    ) -> Ranking:
        """Rank in this replica's next batch; 503 at once when it could not start in time, 504 at the deadline."""
        lane = self.lanes[method.stages]
        try:
            lane.admission.admit(deadline.at)
        except Overloaded as exc:
            raise Unavailable(f"overloaded: {exc}; retry", retry_after_s=exc.retry_after_s) from None
        try:
            query = Query(question, method.name, corpus, k, texts, deadline.at)
            return await asyncio.wait_for(lane.batcher.submit(query), deadline.left_s())
        except TimeoutError:
            raise GatewayTimeout(f"retrieval did not finish within {deadline.budget_s:g} s") from None
        except DeadlineExceeded as exc:
            raise GatewayTimeout(f"retrieval did not start within {deadline.budget_s:g} s ({exc})") from None
        finally:
            lane.admission.done()

    async def _generate(
        self, generator: DeploymentHandle, request: dict[str, str], deadline: Deadline
    ) -> dict[str, Any]:
        """Generation columns for one request row; a request the engine refuses is a 422, other failures a 502."""
        response = generator.generate.remote(request)
        generation: dict[str, Any] = await _call(response, deadline, "generator")
        error = generation["generation_error"]
        if is_rejected(error):
            raise Unprocessable(f"the generator cannot run this request: {error.removeprefix(REJECTED)}")
        if error is not None:
            raise BadGateway(f"generation failed: {error}")
        return generation
