"""The HTTP ingress: validates requests, ranks contexts in this replica (serve/retrieval.py: concurrent requests
batched by serve/batcher.py, one queue per stage chain, refused at once when they could not be answered in time),
runs the answering stages (`read_contexts`, `answer_prompts`, `parse_answers`) on the one-row batch of a request,
and calls the generator deployment through its handle.

Every request has a deadline: the route's configured timeout, shortened by the request's `X-Timeout-Ms` header.
Retrieval and answer responses carry a `Server-Timing` header with the seconds spent per step, in milliseconds."""

import asyncio
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import pyarrow as pa
from fastapi import FastAPI, Header, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from ray import serve
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle, DeploymentResponse

from serve import openai_api
from serve.admission import Admission, Overloaded
from serve.batcher import Batcher
from serve.errors import (
    BadGateway,
    BadRequest,
    GatewayTimeout,
    NotFound,
    Unavailable,
    Unprocessable,
    error_body,
    install_error_handlers,
    install_guard,
)
from serve.metrics import RequestMetrics
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
from t2rag.answer.readable import ReadableAnswer
from t2rag.config import RunConfig
from t2rag.errors import T2RagError
from t2rag.generation.base import REJECTED, ChatRequest, SamplingParams, is_rejected
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.requests import REQUEST_COLUMNS, request_columns, request_row
from t2rag.methods import METHODS, PROMPTING, Method
from t2rag.resources import Resources
from t2rag.stages import built
from t2rag.stages.base import run_chain, with_columns

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


@dataclass(frozen=True)
class Prepared:
    """A question's answer prompt, ready for the generator: the one-row batch with its request columns."""

    method: str
    corpus: str
    batch: pa.Table
    contexts: list[Context]
    seconds: dict[str, float]
    started: float
    retrieved: float

    @property
    def request(self) -> dict[str, str]:
        return self.batch.select(list(REQUEST_COLUMNS)).to_pylist()[0]

    def for_chat(self, body: openai_api.ChatCompletionRequest, generator: GeneratorConfig | None) -> "Prepared":
        """The prompt with the chat's conversation and sampling parameters."""
        system, turns = body.conversation()
        messages = openai_api.with_conversation(json.loads(self.request["messages_json"]), system, turns)
        params = SamplingParams.model_validate_json(self.request["params_json"])
        default = generator.sampling if generator is not None else params
        changes = {
            "temperature": body.temperature if body.temperature is not None else default.temperature,
            "top_p": body.top_p if body.top_p is not None else default.top_p,
            "max_tokens": body.token_limit() or params.max_tokens,
            "seed": body.seed if body.seed is not None else params.seed,
            "stop": body.stops(),
        }
        request = ChatRequest(tuple(messages), params.model_copy(update=changes))
        batch = with_columns(self.batch, request_columns([request]))
        return Prepared(self.method, self.corpus, batch, self.contexts, self.seconds, self.started, self.retrieved)


def _stream_error(status: int, message: str) -> str:
    """An error inside a stream that has begun: OpenAI's error object as an event."""
    return f"data: {json.dumps(error_body(status, message, openai=True))}\n\n"


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
        self.prompting = built(self.resources, PROMPTING)
        self.parsing = built(self.resources, ("parse_answers",))
        self.methods = {name: METHODS[name] for name in methods}
        self.generator = generator
        self.created = int(time.time())
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
        routes = {getattr(r, "path", "") for r in app.routes}
        install_guard(app, self.settings.guard(MAX_BODY_BYTES), RequestMetrics(routes))
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
            default_k=self.resources.config.retrieval.k,
            max_k=MAX_K,
        )

    @api.post("/retrieve", response_model=RetrieveResponse, responses=_ERRORS, summary="Top-k contexts")
    async def retrieve(
        self, body: RetrieveRequest, response: Response, timeout_ms: TimeoutHeader = None
    ) -> RetrieveResponse:
        deadline = Deadline(self.settings.retrieval_timeout_s, timeout_ms)
        method = self._method(body.method, retrieving=True)
        corpus = self._corpus(body.subset)
        k = body.k or self.resources.config.retrieval.k
        ranking = await self._retrieve(method, corpus, body.question, k, deadline, texts=body.with_text)
        response.headers["Server-Timing"] = server_timing(
            {**ranking.seconds, "total": time.monotonic() - deadline.started}
        )
        return RetrieveResponse(method=method.name, subset=corpus, contexts=[Context(**c) for c in ranking.contexts])

    @api.post("/answer", response_model=AnswerResponse, responses=_GENERATION_ERRORS, summary="Retrieve and answer")
    async def answer(
        self, body: AnswerRequest, request: Request, response: Response, timeout_ms: TimeoutHeader = None
    ) -> AnswerResponse:
        deadline = Deadline(self.settings.generation_timeout_s, timeout_ms)
        method = self._method(body.method, retrieving=False)
        request.state.t2rag_method = method.name
        prepared = await self._prepare(method, body.subset, body.question, body.k, body.context_id, deadline)
        generation = await self._generate(self._require_generator(), prepared.request, deadline)
        generated = time.perf_counter()
        response.headers["Server-Timing"] = server_timing(
            {**prepared.seconds, "generate": generated - prepared.retrieved, "total": generated - prepared.started}
        )
        record = self._parsed(prepared, generation)
        prediction = record["prediction"]
        return AnswerResponse(
            method=method.name,
            subset=prepared.corpus,
            prediction=prediction if prediction is not None and math.isfinite(prediction) else None,
            prediction_source=record["prediction_source"],
            formula=record["formula"],
            reasoning_steps=record["reasoning_steps"],
            json_ok=bool(record["json_ok"]),
            formula_ok=bool(record["formula_ok"]),
            raw_output=generation["raw_output"],
            contexts=prepared.contexts,
            usage=_usage(generation),
            timings=Timings(
                retrieval_s=round(prepared.retrieved - prepared.started, 4),
                generation_s=round(generated - prepared.retrieved, 4),
                total_s=round(time.perf_counter() - prepared.started, 4),
            ),
        )

    # -- the OpenAI API ------------------------------------------------------------------------------------
    @api.get("/v1/models", summary="OpenAI: the served methods, as models")
    async def models(self) -> dict[str, Any]:
        return openai_api.model_list(self._chat_models(), self.created)

    @api.post(
        "/v1/chat/completions",
        summary="OpenAI: retrieve with the method named by `model` and answer the last user message",
        responses={200: {"description": "a chat.completion, or with `stream` a text/event-stream of chunks"}},
    )
    async def chat_completions(
        self, body: openai_api.ChatCompletionRequest, request: Request, timeout_ms: TimeoutHeader = None
    ) -> Response:
        deadline = Deadline(self.settings.generation_timeout_s, timeout_ms)
        unsupported = body.unsupported()
        if unsupported is not None:
            raise BadRequest(f"{unsupported[0]}: {unsupported[1]}", param=unsupported[0], code="unsupported_value")
        method = self.methods.get(body.model)
        if method is None or (method.reads == "gold" and body.t2rag.context_id is None):
            hint = "; oracle needs t2rag.context_id" if method is not None else ""
            raise NotFound(
                f"model '{body.model}' is not served here (models: {', '.join(self._chat_models())}){hint}",
                param="model",
                code="model_not_found",
            )
        request.state.t2rag_method = method.name
        try:
            question = body.question()
        except ValueError as exc:
            raise BadRequest(str(exc), param="messages", code="invalid_value") from None
        options = body.t2rag
        prepared = await self._prepare(method, options.subset, question, options.k, options.context_id, deadline)
        prepared = prepared.for_chat(body, self.resources.config.generator)
        model = method.name
        if body.stream:
            return StreamingResponse(self._chat_stream(body, prepared, model, deadline), media_type="text/event-stream")
        generation = await self._generate(self._require_generator(), prepared.request, deadline)
        record = self._parsed(prepared, generation)
        readable = ReadableAnswer()
        content = readable.add(generation["raw_output"]) + readable.finish(record["prediction"], record["formula"])
        rag = self._rag_result(prepared, record, generation, options.with_text)
        return JSONResponse(openai_api.completion(openai_api.completion_id(), model, content, generation, rag))

    async def _chat_stream(
        self, body: openai_api.ChatCompletionRequest, prepared: Prepared, model: str, deadline: Deadline
    ) -> AsyncIterator[str]:
        """Chunks as the generator produces its text: the first carries the retrieved contexts, the last the
        parsed answer; then the usage (when asked) and `[DONE]`. A failure after the first chunk is an error event."""
        cid = openai_api.completion_id()
        contexts = self._rag_result(prepared, None, None, body.t2rag.with_text)
        yield openai_api.chunk(cid, model, {"role": "assistant", "content": ""},
                               t2rag=contexts.model_dump(exclude_none=True))  # fmt: skip
        readable = ReadableAnswer()
        generation: dict[str, Any] | None = None
        try:
            stream = self._require_generator().options(stream=True).stream.remote(prepared.request)
            async with asyncio.timeout(deadline.left_s()):
                async for piece in stream:
                    if "text" in piece:
                        text = readable.add(piece["text"])
                        if text:
                            yield openai_api.chunk(cid, model, {"content": text})
                    else:
                        generation = piece
        except TimeoutError:
            yield _stream_error(504, f"the generator did not finish within {deadline.budget_s:g} s")
            yield openai_api.DONE
            return
        except _UNAVAILABLE:
            yield _stream_error(503, "the generator is unavailable right now (a replica may be restarting); retry")
            yield openai_api.DONE
            return
        if generation is None or generation["generation_error"] is not None:
            error = "the engine ended without a result" if generation is None else generation["generation_error"]
            status = 422 if is_rejected(error) else 502
            yield _stream_error(status, f"generation failed: {error.removeprefix(REJECTED)}")
            yield openai_api.DONE
            return
        record = self._parsed(prepared, generation)
        tail = readable.finish(record["prediction"], record["formula"])
        rag = self._rag_result(prepared, record, generation, False)
        yield openai_api.chunk(cid, model, {"content": tail}, openai_api.finish_reason(generation),
                               t2rag=rag.model_dump(exclude_none=True, exclude={"contexts"}))  # fmt: skip
        if body.stream_options is not None and body.stream_options.include_usage:
            yield openai_api.usage_chunk(cid, model, generation)
        yield openai_api.DONE

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
                    finish_reason=openai_api.finish_reason(generation),
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

    def _chat_models(self) -> list[str]:
        """The methods a chat request can name without an extension field (oracle needs a context id)."""
        return [n for n, m in self.methods.items() if m.reads != "gold"]

    async def _prepare(
        self,
        method: Method,
        subset: str | None,
        question: str,
        k: int | None,
        context_id: str | None,
        deadline: Deadline,
    ) -> Prepared:
        """The answer prompt of one question: retrieval (or the given gold context), `read_contexts` and
        `answer_prompts` on a one-row batch, as every engine runs them. `k` None: the run config's."""
        started = time.perf_counter()
        k = k or self.resources.config.retrieval.k
        corpus = self._corpus(subset)
        if context_id is not None and method.reads != "gold":
            raise BadRequest(f"context_id applies only to method oracle, not {method.name}", param="context_id")
        row: dict[str, Any] = {"subset": corpus, "method": method.name, "question": question, "k": k}
        ranked: list[dict[str, Any]] = []
        seconds: dict[str, float] = {}
        self._require_generator()
        if method.retrieves:
            ranking = await self._retrieve(method, corpus, question, k, deadline, texts=False)
            ranked, seconds = ranking.contexts, ranking.seconds
            row["context_ids"] = [c["context_id"] for c in ranked]
        elif method.reads == "gold":
            gold = self._gold_context(context_id, corpus)
            ranked = [{"context_id": gold.context_id, "subset": gold.subset, "score": None}]
            row["gold_context"] = gold.text
        batch = run_chain(self.prompting, pa.Table.from_pylist([row]))
        texts = batch.column("reader_texts")[0].as_py()
        contexts = [Context(**c, text=text) for c, text in zip(ranked, texts, strict=True)]
        return Prepared(method.name, corpus, batch, contexts, seconds, started, time.perf_counter())

    def _parsed(self, prepared: Prepared, generation: dict[str, Any]) -> dict[str, Any]:
        """`parse_answers` on the prepared row with its generation: the record of the question."""
        batch = with_columns(prepared.batch, {name: pa.array([value]) for name, value in generation.items()})
        return run_chain(self.parsing, batch.append_column("reference", pa.nulls(1, pa.float64()))).to_pylist()[0]

    @staticmethod
    def _rag_result(
        prepared: Prepared, record: dict[str, Any] | None, generation: dict[str, Any] | None, texts: bool
    ) -> openai_api.RagResult:
        contexts = [c if texts else c.model_copy(update={"text": None}) for c in prepared.contexts]
        result = openai_api.RagResult(method=prepared.method, subset=prepared.corpus, contexts=contexts)
        if record is None or generation is None:
            return result
        prediction = record["prediction"]
        return result.model_copy(
            update={
                "prediction": prediction if prediction is not None and math.isfinite(prediction) else None,
                "prediction_source": record["prediction_source"],
                "formula": record["formula"],
                "reasoning_steps": record["reasoning_steps"] or [],
                "json_ok": bool(record["json_ok"]),
                "formula_ok": bool(record["formula_ok"]),
                "raw_output": generation["raw_output"],
            }
        )

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
