"""The HTTP ingress: validates requests and composes the retriever and generator deployments through handles."""

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from fastapi import FastAPI
from ray import serve
from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError
from ray.serve.handle import DeploymentHandle, DeploymentResponse

from serve.errors import BadGateway, BadRequest, GatewayTimeout, Unavailable, install_error_handling
from serve.schemas import (
    MAX_BODY_BYTES,
    MAX_K,
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
    RetrieveRequest,
    RetrieveResponse,
    Timings,
    Usage,
)
from serve.settings import ServeSettings, corpus_names, default_corpus
from t2rag.answer import extract_answer
from t2rag.config import RunConfig
from t2rag.errors import T2RagError
from t2rag.generation.base import ChatRequest, Generation, SamplingParams
from t2rag.methods import METHODS, Method
from t2rag.pipeline.answering import answer_columns
from t2rag.system import RAGSystem

log = logging.getLogger(__name__)
T = TypeVar("T")

api = FastAPI(
    title="t2rag",
    version="0.1.0",
    description="Retrieval and numerical question answering over financial reports (T2-RAGBench), on Ray Serve. "
    'Every error is a status code with a one-line JSON reason, `{"error": "..."}`.',
)
install_error_handling(api, MAX_BODY_BYTES)

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in [
        (400, "bad input: unknown method or subset, unparseable JSON, ..."),
        (413, "request body too large"),
        (422, "a field is missing, of the wrong type or out of range"),
        (503, "a deployment has no live replica (e.g. one is being replaced); retry"),
        (504, "a deployment did not answer in time"),
    ]
}
_GENERATION_ERRORS = {**_ERRORS, 502: {"model": ErrorResponse, "description": "the generator failed"}}
_UNAVAILABLE = (RayActorError, ActorUnavailableError, DeploymentUnavailableError, BackPressureError)


# Module-level helpers come before the deployment class: Serve pickles the class when it is decorated.


async def _call(response: DeploymentResponse, timeout_s: float, what: str) -> Any:
    """Await a handle call within a time limit, mapping replica faults to 503/504 and t2rag errors to 400."""
    try:
        return await asyncio.wait_for(_awaited(response), timeout_s)
    except TimeoutError:
        response.cancel()
        raise GatewayTimeout(f"the {what} did not answer within {timeout_s:g} s") from None
    except _UNAVAILABLE as exc:
        log.warning("%s unavailable: %s", what, type(exc).__name__)
        raise Unavailable(f"the {what} is unavailable right now (a replica may be restarting); retry") from None
    except RayTaskError as exc:
        if isinstance(exc.cause, T2RagError):
            raise BadRequest(str(exc.cause)) from None
        raise


async def _awaited(response: Awaitable[T]) -> T:
    return await response


def _usage(generation: Generation) -> Usage:
    return Usage(
        prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens,
        total_tokens=generation.prompt_tokens + generation.completion_tokens,
    )


@serve.deployment(name="Ingress")
@serve.ingress(api)
class RAGIngress:
    """Routes /retrieve, /answer and /generate to the deployments; /health and /methods answer locally."""

    def __init__(
        self,
        config: RunConfig,
        settings: ServeSettings,
        methods: list[str],
        retrievers: dict[str, DeploymentHandle],
        generator: DeploymentHandle | None,
    ):
        self.settings = settings
        self.system = RAGSystem(config)
        self.methods = {name: METHODS[name] for name in methods}
        self.retrievers = retrievers
        self.generator = generator
        self.subsets = self.system.questions.subsets
        self.corpora = corpus_names(self.subsets)
        self.default_corpus = default_corpus(self.subsets)
        for name in self.corpora:  # build the corpora now: /answer reads context texts from them
            self.system.corpus(name)

    # -- routes --------------------------------------------------------------------------------------------
    @api.get("/health", response_model=HealthResponse, summary="Liveness of the ingress")
    async def health(self) -> HealthResponse:
        return HealthResponse(status="ok")

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
    async def retrieve(self, body: RetrieveRequest) -> RetrieveResponse:
        method = self._method(body.method, retrieving=True)
        corpus = self._corpus(body.subset)
        contexts = await self._retrieve(method, corpus, body.question, body.k)
        return RetrieveResponse(method=method.name, subset=corpus, contexts=contexts)

    @api.post("/answer", response_model=AnswerResponse, responses=_GENERATION_ERRORS, summary="Retrieve and answer")
    async def answer(self, body: AnswerRequest) -> AnswerResponse:
        started = time.perf_counter()
        method = self._method(body.method, retrieving=False)
        corpus = self._corpus(body.subset)
        generator = self._require_generator()
        if body.context_id is not None and method.reads != "gold":
            raise BadRequest(f"context_id applies only to method oracle, not {method.name}")
        contexts: list[Context] = []
        ranked_ids = None
        gold = [""]
        if method.retrieves:
            contexts = await self._retrieve(method, corpus, body.question, body.k)
            ranked_ids = [[c.context_id for c in contexts]]
        elif method.reads == "gold":
            contexts = [self._gold_context(body.context_id, corpus)]
            gold = [contexts[0].text]
        retrieved = time.perf_counter()
        texts = self.system.contexts(method, corpus, gold, ranked_ids, body.k)
        requests = self.system.answer_requests([body.question], texts)
        generation = await self._generate(generator, requests[0])
        generated = time.perf_counter()
        record = {name: values[0] for name, values in answer_columns(requests, [generation], texts, [None]).items()}
        prediction = record["prediction"]
        return AnswerResponse(
            method=method.name,
            subset=corpus,
            prediction=prediction if prediction is not None and math.isfinite(prediction) else None,
            prediction_source=record["prediction_source"],
            formula=record["formula"],
            reasoning_steps=list(extract_answer(generation.text).reasoning_steps),
            json_ok=bool(record["json_ok"]),
            formula_ok=bool(record["formula_ok"]),
            raw_output=generation.text,
            contexts=contexts,
            usage=_usage(generation),
            timings=Timings(
                retrieval_s=round(retrieved - started, 4),
                generation_s=round(generated - retrieved, 4),
                total_s=round(time.perf_counter() - started, 4),
            ),
        )

    @api.post("/generate", response_model=GenerateResponse, responses=_GENERATION_ERRORS, summary="Chat completion")
    async def generate(self, body: GenerateRequest) -> GenerateResponse:
        generator = self._require_generator()
        params = SamplingParams(temperature=body.temperature, top_p=body.top_p, max_tokens=body.max_tokens)
        request = ChatRequest(tuple({"role": m.role, "content": m.content} for m in body.messages), params)
        started = time.perf_counter()
        generation = await self._generate(generator, request)
        return GenerateResponse(
            id=f"chatcmpl-{uuid.uuid4().hex[:24]}",
            created=int(time.time()),
            model=self._model_name() or "unknown",
            choices=[
                ChatChoice(
                    index=0, message=ChatMessage(role="assistant", content=generation.text), finish_reason="stop"
                )
            ],
            usage=_usage(generation),
            text=generation.text,
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
        generator = self.system.config.generator
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
        docs = self.system.corpus(corpus)
        try:
            position = docs.context_ids.index(context_id)
        except ValueError:
            raise BadRequest(f"unknown context_id '{context_id}' in corpus {corpus}") from None
        return Context(context_id=context_id, subset=docs.subsets[position], score=None, text=docs.texts[position])

    async def _retrieve(self, method: Method, corpus: str, question: str, k: int) -> list[Context]:
        response = self.retrievers[method.name].retrieve.remote(question, corpus, k)
        rows = await _call(response, self.settings.retrieval_timeout_s, f"retriever {method.name}")
        return [Context(**row) for row in rows]

    async def _generate(self, generator: DeploymentHandle, request: ChatRequest) -> Generation:
        response = generator.generate.remote(request)
        generation: Generation = await _call(response, self.settings.generation_timeout_s, "generator")
        if generation.error is not None:
            raise BadGateway(f"generation failed: {generation.error}")
        return generation
