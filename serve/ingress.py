"""The HTTP ingress: thin routes over the served app's parts. Retrieval runs in this replica (serve/lanes.py, one
queue per stage chain, over serve/retrieval.py); the answering stages run on the one-row batch of a request
(serve/answering.py); the generator deployment is called through its handle; OpenAI's replies are built in
serve/chat.py from serve/openai_api.py's models; deadlines (serve/deadlines.py) and errors (serve/errors.py) have
their own modules.

Every request has a deadline: the route's configured timeout, shortened by the request's `X-Timeout-Ms` header.
Retrieval and answer responses carry a `Server-Timing` header with the seconds spent per step, in milliseconds."""

import asyncio
import time
from typing import Any

import pyarrow as pa
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from ray import serve
from ray.serve.handle import DeploymentHandle

from serve import chat, openai_api
from serve.answering import Answering, Prepared, answer_fields
from serve.deadlines import Deadline, TimeoutHeader, call_until, server_timing
from serve.errors import (
    GENERATION_ERRORS,
    ROUTE_ERRORS,
    BadRequest,
    NotFound,
    generation_failure,
    install_error_handlers,
)
from serve.guard import install_guard
from serve.lanes import Lanes
from serve.metrics import RequestMetrics
from serve.retrieval import RetrievalService
from serve.schemas import (
    MAX_BODY_BYTES,
    MAX_K,
    AnswerRequest,
    AnswerResponse,
    Context,
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
from t2rag.config import RunConfig, in_this_process
from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.requests import request_row
from t2rag.methods import Method, get_method, is_method
from t2rag.resources import Resources
from t2rag.stages import built
from t2rag.stages.base import run_chain

api = FastAPI(
    title="t2rag",
    version="0.1.0",
    description="Retrieval and numerical question answering over financial reports (T2-RAGBench), on Ray Serve. "
    'Every error is a status code with a one-line JSON reason, `{"error": "..."}`.',
)
install_error_handlers(api)


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


@serve.deployment(name="Ingress")
@serve.ingress(api)
class RAGIngress:
    """Ranks contexts for /retrieve and /answer here, calls the generator for /answer and /generate; /health, /ready
    and /methods answer locally."""

    def __init__(
        self, config: RunConfig, settings: ServeSettings, methods: list[str], generator: DeploymentHandle | None
    ):
        self.settings = settings
        self.resources = Resources(in_this_process(config))
        self.answering = Answering(self.resources)
        self.route_prompting = built(self.resources, ("route_prompts",))
        self.methods = {name: get_method(name) for name in methods}
        self.generator = generator
        self.created = int(time.time())
        self.app_name = serve.get_replica_context().app_name
        self.subsets = self.resources.questions.subsets
        self.default_corpus = default_corpus(self.subsets)
        retrieval = RetrievalService(self.resources, list(self.methods.values()))
        self.corpora = retrieval.corpora
        for name in self.corpora:  # build the corpora now: /answer reads context texts from them
            self.resources.corpus(name)
        retrieval.build()
        self.lanes = Lanes(retrieval, settings)

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

    @api.get("/ready", response_model=ReadyResponse, summary="Readiness: every deployment of the app is running",
             responses={503: {"model": ReadyResponse, "description": "a deployment is not running yet"}})  # fmt: skip
    async def ready(self) -> JSONResponse:
        readiness = await asyncio.to_thread(app_readiness, self.app_name)
        return JSONResponse(readiness.model_dump(), status_code=200 if readiness.status == "ready" else 503)

    @api.get("/methods", response_model=MethodsResponse, summary="The served methods, loaded subsets and corpora")
    async def list_methods(self) -> MethodsResponse:
        return MethodsResponse(
            methods=[self._describe(m) for m in self.methods.values()],
            subsets=self.subsets,
            corpora=self.corpora,
            default_corpus=self.default_corpus,
            generator=self._model_name(),
            default_k=self.resources.config.retrieval.k,
            max_k=MAX_K,
        )

    @api.post("/retrieve", response_model=RetrieveResponse, responses=ROUTE_ERRORS, summary="Top-k contexts")
    async def retrieve(
        self, body: RetrieveRequest, response: Response, timeout_ms: TimeoutHeader = None
    ) -> RetrieveResponse:
        deadline = Deadline(self.settings.retrieval_timeout_s, timeout_ms)
        method = self._method(body.method, retrieving=True)
        corpus = self._corpus(body.corpus)
        k = body.k or self.resources.config.retrieval.k
        reply = await self._route_reply(method, body.question, deadline)
        ranking = await self.lanes.rank(method, corpus, body.question, k, deadline, texts=body.with_text,
                                        route_reply=reply)  # fmt: skip
        response.headers["Server-Timing"] = server_timing(
            {**ranking.seconds, "total": time.monotonic() - deadline.started}
        )
        searched = ranking.corpus or corpus  # a routed method's: the subset its router chose
        return RetrieveResponse(method=method.name, corpus=searched, contexts=[Context(**c) for c in ranking.contexts])

    @api.post("/answer", response_model=AnswerResponse, responses=GENERATION_ERRORS, summary="Retrieve and answer")
    async def answer(
        self, body: AnswerRequest, request: Request, response: Response, timeout_ms: TimeoutHeader = None
    ) -> AnswerResponse:
        deadline = Deadline(self.settings.generation_timeout_s, timeout_ms)
        method = self._method(body.method, retrieving=False)
        request.state.t2rag_method = method.name
        prepared = await self._prepare(method, body.corpus, body.question, body.k, body.context_id, deadline)
        generation = await self._generate(prepared.request, deadline)
        generated = time.perf_counter()
        response.headers["Server-Timing"] = server_timing(
            {**prepared.seconds, "generate": generated - prepared.retrieved, "total": generated - prepared.started}
        )
        record = self.answering.record(prepared, generation)
        timings = Timings(
            retrieval_s=round(prepared.retrieved - prepared.started, 4),
            generation_s=round(generated - prepared.retrieved, 4),
            total_s=round(time.perf_counter() - prepared.started, 4),
        )
        fields = answer_fields(record, generation)
        return AnswerResponse(method=method.name, corpus=prepared.corpus, contexts=prepared.contexts,
                              usage=Usage.of(generation), timings=timings, **fields)  # fmt: skip

    # -- the OpenAI API ------------------------------------------------------------------------------------
    @api.get("/v1/models", summary="OpenAI: the served methods, as models")
    async def models(self) -> openai_api.ModelList:
        return openai_api.model_list(self._chat_models(), self.created)

    @api.post(
        "/v1/chat/completions",
        summary="OpenAI: retrieve with the method named by `model` and answer the last user message",
        responses={200: {"model": openai_api.RagCompletion,
                         "description": "a chat.completion, or with `stream` a text/event-stream of chunks"}},
    )  # fmt: skip
    async def chat_completions(
        self, body: openai_api.ChatCompletionRequest, request: Request, timeout_ms: TimeoutHeader = None
    ) -> Response:
        deadline = Deadline(self.settings.generation_timeout_s, timeout_ms)
        unsupported = body.unsupported()
        if unsupported is not None:
            raise BadRequest(f"{unsupported[0]}: {unsupported[1]}", param=unsupported[0], code="unsupported_value")
        method = self.methods.get(body.model)
        if method is None or (method.reader == "gold" and body.t2rag.context_id is None):
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
        prepared = await self._prepare(method, options.corpus, question, options.k, options.context_id, deadline)
        prepared = prepared.for_chat(body, self.resources.config.generator)
        if body.stream:
            events = chat.chunks(self.answering, self._require_generator(), prepared, body, deadline)
            return StreamingResponse(events, media_type="text/event-stream")
        generation = await self._generate(prepared.request, deadline)
        return JSONResponse(chat.completion(self.answering, prepared, generation, options.with_text).dumped())

    @api.post("/generate", response_model=openai_api.GenerateResponse, responses=GENERATION_ERRORS,
              summary="Chat completion")  # fmt: skip
    async def generate(
        self, body: openai_api.GenerateRequest, timeout_ms: TimeoutHeader = None
    ) -> openai_api.GenerateResponse:
        deadline = Deadline(self.settings.generation_timeout_s, timeout_ms)
        self._require_generator()
        params = SamplingParams(temperature=body.temperature, top_p=body.top_p, max_tokens=body.max_tokens)
        request = ChatRequest(tuple({"role": m.role, "content": m.content} for m in body.messages), params)
        started = time.perf_counter()
        generation = await self._generate(request_row(request), deadline)
        text = generation["raw_output"]
        return openai_api.GenerateResponse.of(self._model_name() or "unknown", text, generation, text=text,
                                              generation_s=round(time.perf_counter() - started, 4))  # fmt: skip

    # -- helpers -------------------------------------------------------------------------------------------
    def _method(self, name: str, retrieving: bool) -> Method:
        method = self.methods.get(name)
        if method is None:
            known = "known but not served here" if is_method(name) else "unknown"
            raise BadRequest(f"method '{name}' is {known} (served: {', '.join(self._names(retrieving))})")
        if retrieving and not method.retrieves:
            raise BadRequest(
                f"method '{name}' does not retrieve; use /answer (retrieving: {', '.join(self._names(True))})"
            )
        return method

    def _names(self, retrieving: bool) -> list[str]:
        return [n for n, m in self.methods.items() if m.retrieves or not retrieving]

    def _corpus(self, name: str | None) -> str:
        if name is None:
            return self.default_corpus
        if name not in self.corpora:
            raise BadRequest(f"unknown corpus '{name}' (served: {', '.join(self.corpora)})")
        return name

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
            needs_context_id=method.reader == "gold",
            endpoints=["/retrieve", "/answer"] if method.retrieves else ["/answer"],
        )

    def _chat_models(self) -> list[str]:
        """The methods a chat request can name without an extension field (oracle needs a context id)."""
        return [n for n, m in self.methods.items() if m.reader != "gold"]

    async def _prepare(self, method: Method, corpus_name: str | None, question: str, k: int | None,
                       context_id: str | None, deadline: Deadline) -> Prepared:  # fmt: skip
        """The answer prompt of one question: retrieval (or the given gold context), then the prompting stages.
        `k` None: the run config's."""
        started = time.perf_counter()
        k = k or self.resources.config.retrieval.k
        corpus = self._corpus(corpus_name)
        if context_id is not None and method.reader != "gold":
            raise BadRequest(f"context_id applies only to method oracle, not {method.name}", param="context_id")
        self._require_generator()
        ranked: list[dict[str, Any]] = []
        seconds: dict[str, float] = {}
        gold = self.answering.gold_context(context_id, corpus) if method.reader == "gold" else None
        if method.retrieves:
            reply = await self._route_reply(method, question, deadline)
            ranking = await self.lanes.rank(method, corpus, question, k, deadline, texts=False, route_reply=reply)
            ranked, seconds, corpus = ranking.contexts, ranking.seconds, ranking.corpus or corpus
        return self.answering.prompt(method, corpus, question, k, ranked, gold, seconds, started)

    async def _route_reply(self, method: Method, question: str, deadline: Deadline) -> str | None:
        """An LLM router's reply to its routing prompt, from the app's generator (None for other methods)."""
        if method.router != "llm":
            return None
        self._require_generator()
        prompt = run_chain(self.route_prompting, pa.table({"question": [question]})).to_pylist()[0]
        request = {"messages_json": prompt["messages_json"], "params_json": prompt["params_json"]}
        return (await self._generate(request, deadline))["raw_output"]

    async def _generate(self, request: dict[str, str], deadline: Deadline) -> dict[str, Any]:
        """Generation columns for one request row (a failed generation raises its `generation_failure`)."""
        response = self._require_generator().generate.remote(request)
        generation: dict[str, Any] = await call_until(response, deadline, "generator")
        failure = generation_failure(generation)
        if failure is not None:
            raise failure
        return generation
