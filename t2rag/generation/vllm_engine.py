"""The vLLM engine: its config, its placement, vLLM in this process for batch runs, and Ray Serve LLM when served.

In process (`vllm.LLM`, `VLLMGenerator`): the engine is started once, on the first batch (or `load`), and serves every
later batch of the process. A single-process run holds one; on Ray, each replica of the run's generator service
(ray_jobs.generator_service) holds one, so a run loads the model once per replica, whatever phases (context
summaries, HyDE, answers) generate. Engine settings (tensor parallelism, prefix caching, quantisation) come from
`VLLMConfig` and are shared with serving (`vllm_engine_kwargs`).

Served (`llm_deployment`, `ServeLLMGenerator`): see the section below.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from t2rag.errors import ConfigError, EngineRefused, first_line
from t2rag.generation.base import ChatRequest, ChunkStream, Delta, Generation, Generator, SamplingParams, rejected
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.engine import Batching, Engine
from t2rag.generation.models import PACKAGED_MODELS, packaged_availability
from t2rag.model_access import Availability, hub_availability, loading
from t2rag.model_loads import record_load
from t2rag.pools import PoolShape

if TYPE_CHECKING:
    from ray.serve.deployment import Application
    from ray.serve.handle import DeploymentHandle


class VLLMConfig(GeneratorConfig):
    """vLLM: in process on a Ray run's replicas, behind Ray Serve LLM when served. `model` is a Hugging Face id or
    directory, or a packaged model name (exported to Hugging Face format on first use, see
    t2rag.generation.hf_export)."""

    engine: Literal["vllm"] = "vllm"
    batch_size: int = Field(32, ge=1)  # rows per call: vLLM batches them (and every client's) continuously
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    max_model_len: int = 16384
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    quantization: str | None = None
    dtype: str = "auto"
    enable_prefix_caching: bool = True  # every answer prompt shares the long system prompt
    accelerator_type: str | None = None  # e.g. "H100"
    enforce_eager: bool = False  # no CUDA graphs (the CPU build needs it)
    device: Literal["gpu", "cpu"] = "gpu"  # "cpu": vLLM's CPU build (Serve LLM then runs it without Ray workers)
    engine_env: dict[str, str] = Field(
        default_factory=dict, description="environment of the engine's processes, e.g. VLLM_CPU_KVCACHE_SPACE (GiB)"
    )
    single_process: bool = Field(
        False,
        description="the in-process engine's core and model worker run in the caller's process, not two of their own "
        "(each imports vLLM again: 30 of a small CPU model's 43 s start); one worker only; Serve LLM keeps its own",
    )

    @model_validator(mode="after")
    def _one_worker_in_one_process(self) -> VLLMConfig:
        if self.single_process and self.tensor_parallel_size * self.pipeline_parallel_size > 1:
            raise ValueError("single_process runs one model worker: tensor_parallel_size and "
                             "pipeline_parallel_size must be 1")  # fmt: skip
        return self

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one replica holds (0 on CPU)."""
        return 0 if self.device == "cpu" else self.tensor_parallel_size * self.pipeline_parallel_size


class VLLMEngine(Engine):
    name = "vllm"
    config_class = VLLMConfig
    packages = ("vllm",)

    def build(self, config: VLLMConfig) -> Generator:
        return VLLMGenerator(config)

    def weights(self, config: VLLMConfig) -> Availability:
        # A packaged model is exported to Hugging Face's layout from its installed GGUF at the first load.
        if config.model in PACKAGED_MODELS:
            return packaged_availability(config.model)
        return hub_availability(config.model)

    def batching(self, config: VLLMConfig) -> Batching:
        return "continuous"

    def variant(self, config: VLLMConfig) -> str:
        return config.quantization or ""

    def placement(self, config: VLLMConfig) -> PoolShape:
        gpus = config.gpus_per_replica
        return PoolShape(
            actors=config.replicas,
            cpus=float(gpus or 1),
            gpus=float(gpus),
            batch_rows=config.batch_size,
            gpus_together=config.tensor_parallel_size if gpus else 1,
            accelerator=config.accelerator_type if gpus else None,
            runtime_env=engine_runtime_env(config),
        )

    def served_backend(self, config: VLLMConfig) -> Callable[[], Any]:
        llm_config(config)  # a bad engine config (or no Ray Serve LLM) fails now
        return lambda: llm_deployment(config)

    def served_generator(self, config: VLLMConfig, backend: Any) -> Generator:
        return ServeLLMGenerator(backend, config)


def vllm_engine_kwargs(config: VLLMConfig) -> dict[str, Any]:
    """vLLM engine arguments for batch jobs and for serving."""
    kwargs: dict[str, Any] = {
        "tensor_parallel_size": config.tensor_parallel_size,
        "pipeline_parallel_size": config.pipeline_parallel_size,
        "enable_prefix_caching": config.enable_prefix_caching,
        "max_model_len": config.max_model_len,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "dtype": config.dtype,
    }
    if config.quantization:
        kwargs["quantization"] = config.quantization
    if config.enforce_eager:
        kwargs["enforce_eager"] = True
    return kwargs


def in_process_engine_kwargs(config: VLLMConfig) -> dict[str, Any]:
    """The engine arguments of `VLLMGenerator`'s own engine: with `single_process`, vLLM's uniprocess executor (the
    model worker in the engine core's process; `in_process_env` keeps that in the caller's)."""
    kwargs = vllm_engine_kwargs(config)
    if config.single_process:
        kwargs["distributed_executor_backend"] = "uni"
    return kwargs


def in_process_env(config: VLLMConfig) -> dict[str, str]:
    """The environment `VLLMGenerator`'s own engine starts in: the config's `engine_env` and, with `single_process`,
    vLLM's switch off its engine-core process (read from the environment; on CPU vLLM keeps the uniprocess executor
    only with it off)."""
    return {**config.engine_env, **({"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if config.single_process else {})}


def model_source(config: VLLMConfig) -> str:
    """What vLLM loads: a packaged model name becomes its Hugging Face export (made once, then reused)."""
    if config.model in PACKAGED_MODELS:
        from t2rag.generation.hf_export import export_hf, hf_export_dir

        return str(export_hf(config.model, hf_export_dir(config.model)))
    return config.model


def engine_runtime_env(config: VLLMConfig) -> dict[str, Any] | None:
    """The Ray runtime env of the engine's processes (its `engine_env`), for Ray actors and Serve LLM."""
    return {"env_vars": dict(config.engine_env)} if config.engine_env else None


def sampling_dict(params: SamplingParams, constrained_json: bool) -> dict[str, Any]:
    """vLLM SamplingParams fields for one request (structured output when a schema is set)."""
    out = params.decoding()
    if constrained_json and params.json_schema is not None:
        out["structured_outputs"] = {"json": params.json_schema}
    return out


def vllm_sampling(params: SamplingParams, constrained_json: bool):
    """`vllm.SamplingParams` for one request."""
    import vllm
    from vllm.sampling_params import StructuredOutputsParams

    fields = sampling_dict(params, constrained_json)
    structured = fields.pop("structured_outputs", None)
    return vllm.SamplingParams(
        **fields, structured_outputs=StructuredOutputsParams(**structured) if structured else None
    )


def _closed_error() -> RuntimeError:
    return RuntimeError("the vLLM engine was closed")


class EngineFeed:
    """The one thread that drives a `vllm.LLMEngine`: requests submitted from any thread join the running batch at
    the engine's next step, so a batch never waits for the last sequences of the one before (`LLM.chat` adds one
    batch and steps until all of it is done). Each request gets a `Future` of its `RequestOutput`; a request the
    engine refuses as given (too long) gets its `ValueError`, and a failed step fails every request in flight."""

    def __init__(self, engine: Any):
        self._engine = engine
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting: dict[str, Future] = {}
        self._ids = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="vllm-engine-feed", daemon=True)
        self._thread.start()

    def submit(self, prompts: Sequence[tuple[list[int], Any]]) -> list[Future]:
        """Futures of the outputs of (prompt token ids, `vllm.SamplingParams`) pairs, in order."""
        futures = []
        for token_ids, params in prompts:
            future: Future = Future()
            if self._closed:
                future.set_exception(_closed_error())
            else:
                self._inbox.put((f"t2rag-{next(self._ids)}", token_ids, params, future))
            futures.append(future)
        return futures

    def in_flight(self) -> int:
        """Requests the engine holds (running or queued)."""
        return len(self._waiting)

    def close(self) -> None:
        self._closed = True
        self._inbox.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            # Block for new work only when the engine has none; otherwise take what came and step.
            items = [self._inbox.get()] if not self._waiting else []
            while not self._inbox.empty():
                items.append(self._inbox.get())
            if None in items:
                for item in items:
                    if item is not None:
                        item[3].set_exception(_closed_error())
                self._fail(_closed_error())
                return
            for request_id, token_ids, params, future in items:
                try:
                    self._engine.add_request(request_id, {"prompt_token_ids": token_ids}, params)
                except ValueError as exc:
                    future.set_exception(exc)
                    continue
                self._waiting[request_id] = future
            if not self._waiting:
                continue
            try:
                outputs = self._engine.step()
            except Exception as exc:  # the engine failed: whatever it held may succeed on a retry
                self._fail(exc)
                continue
            for output in outputs:
                if output.finished:
                    self._waiting.pop(output.request_id).set_result(output)

    def _fail(self, exc: BaseException) -> None:
        if self._waiting:
            with contextlib.suppress(Exception):  # a broken engine may refuse; the futures carry the cause
                self._engine.abort_request(list(self._waiting))
        for future in self._waiting.values():
            future.set_exception(exc)
        self._waiting.clear()


class VLLMGenerator(Generator):
    """The Generator interface over one in-process vLLM engine, fed by `EngineFeed`: `generate` may be called from
    several threads at once, and their requests share the engine's running batch."""

    engine = "vllm"
    concurrent_batches = True

    def __init__(self, config: VLLMConfig):
        self.config = config
        self._llm: Any = None
        self._feed: EngineFeed | None = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()

    @property
    def model_id(self) -> str:
        q = f"@{self.config.quantization}" if self.config.quantization else ""
        return f"{self.config.model}{q}"

    def load(self) -> None:
        with self._load_lock:
            if self._llm is None:
                import vllm

                os.environ.update(in_process_env(self.config))
                source = model_source(self.config)
                with loading(self.config.model, source):
                    try:
                        self._llm = vllm.LLM(model=source, **in_process_engine_kwargs(self.config))
                    except (ValueError, TypeError) as exc:  # argument validation: the same on every retry
                        raise EngineRefused(f"vLLM refused the generator config: {first_line(exc)}") from exc
                self._tokenizer = self._llm.get_tokenizer()
                self._feed = EngineFeed(self._llm.llm_engine)
                record_load(self.config.model)

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        if not requests:
            return []
        self.load()
        assert self._feed is not None
        started = time.perf_counter()
        futures = self._feed.submit(
            [(self.prompt_token_ids(r), vllm_sampling(r.params, self.config.constrained_json)) for r in requests]
        )
        wait(futures)
        seconds = (time.perf_counter() - started) / len(requests)
        return [_generation(future, seconds) for future in futures]

    def prompt_token_ids(self, request: ChatRequest) -> list[int]:
        """The request's messages as `LLM.chat` renders them: the chat template with the generation prompt, then
        tokenized without special tokens beyond the template's own."""
        text = self._tokenizer.apply_chat_template(list(request.messages), add_generation_prompt=True, tokenize=False)
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def close(self) -> None:
        if self._feed is not None:
            self._feed.close()
        self._llm = self._feed = self._tokenizer = None


def _generation(future: Future, seconds: float) -> Generation:
    exc = future.exception()
    if isinstance(exc, ValueError):  # refused as given (too long): a retry would not help
        return Generation(text="", error=rejected(str(exc).splitlines()[0]))
    if exc is not None:  # the engine failed: the request may succeed on a retry
        return Generation(text="", error=f"vLLM failed: {type(exc).__name__}: {exc}")
    o = future.result()
    return Generation(
        text=o.outputs[0].text,
        prompt_tokens=len(o.prompt_token_ids or []),
        completion_tokens=len(o.outputs[0].token_ids),
        seconds=seconds,
        finish_reason=o.outputs[0].finish_reason,
        cached_prompt_tokens=getattr(o, "num_cached_tokens", None),
    )


# -- served: Ray Serve LLM ---------------------------------------------------------------------------------
# `llm_deployment` is Serve LLM's `LLMServer` deployment; `serve.app.compose` binds it into the t2rag application as
# a child of the Generator deployment, so it has no route of its own on the HTTP proxy (every request goes through
# the ingress and its API key) and is reached through a deployment handle, from a replica on any node.
# `ServeLLMGenerator` streams chat requests over that handle; with `prefix_reuse`, Serve LLM's prefix-aware router
# picks the replica of each request. `ray.serve.llm` imports only where vLLM is installed (the GPU extra, or the
# CPU build of `make vllm`).
#: Ray Serve LLM's request router that sends a prompt to the replica holding most of its prefix.
PREFIX_ROUTER = "ray.serve.llm.request_router.PrefixCacheAffinityRouter"


def deployment_config(generator: VLLMConfig) -> dict[str, Any]:
    """The Serve deployment options of a vLLM generator: its fixed replica count and, with `prefix_reuse`, Serve
    LLM's prefix-aware router (online requests come one at a time; see the README)."""
    deployment: dict[str, Any] = {
        "autoscaling_config": {"min_replicas": generator.replicas, "max_replicas": generator.replicas}
    }
    if generator.prefix_reuse:
        deployment["request_router_config"] = {"request_router_class": PREFIX_ROUTER}
    return deployment


def llm_config(generator: VLLMConfig) -> Any:
    """Ray Serve LLM's `LLMConfig` for a vLLM generator config."""
    try:
        from ray.serve.llm import LLMConfig
    except ImportError as exc:
        raise ConfigError(
            "serving a vllm generator needs Ray Serve LLM, which imports only with vllm installed "
            "(pip install 't2rag[gpu]')"
        ) from exc
    return LLMConfig(
        model_loading_config={"model_id": generator.model, "model_source": model_source(generator)},
        runtime_env=engine_runtime_env(generator),
        engine_kwargs=vllm_engine_kwargs(generator),
        deployment_config=deployment_config(generator),
        accelerator_type=generator.accelerator_type,
        # vLLM's CPU platform refuses Ray workers; Serve LLM uses its multiprocessing executor for a CPU config.
        accelerator_config={"kind": "cpu"} if generator.device == "cpu" else None,
    )


def llm_deployment(generator: VLLMConfig) -> Application:
    """Serve LLM's engine deployment for `generator`, to bind into an application (it adds no HTTP route)."""
    config = llm_config(generator)  # first: without vllm, a ConfigError naming the fix
    from ray.serve.llm import build_llm_deployment

    return build_llm_deployment(config)


class ServeLLMGenerator(Generator):
    """Chat completions through the `LLMServer` handle, streamed (a whole completion is its stream joined)."""

    engine = "vllm"
    concurrent_batches = True

    def __init__(self, handle: DeploymentHandle, generator: VLLMConfig):
        self.handle = handle.options(stream=True)
        self.generator = generator

    @property
    def model_id(self) -> str:
        return self.generator.model

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        """Outside an event loop only (a served replica calls `astream`)."""

        async def whole(request: ChatRequest) -> Generation:
            done = Generation(text="", error="the engine ended without a result")
            async for delta in self.astream(request):
                done = delta.done or done
            return done

        async def every() -> list[Generation]:
            return list(await asyncio.gather(*(whole(r) for r in requests)))

        return asyncio.run(every())

    async def astream(self, request: ChatRequest) -> AsyncIterator[Delta]:
        from ray.serve.llm.openai_api_models import ChatCompletionRequest

        sampling = sampling_dict(request.params, self.generator.constrained_json)
        structured = sampling.pop("structured_outputs", None)
        body: dict[str, Any] = {
            "model": self.generator.model,
            "messages": list(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            **sampling,
        }
        if structured:
            schema = {"name": "answer", "schema": structured["json"]}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        stream = ChunkStream()
        async for batch in self.handle.chat.remote(ChatCompletionRequest(**body)):
            for item in batch if isinstance(batch, list) else [batch]:
                event = _event(item)
                if "error" in event:
                    error = event["error"]
                    message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
                    code = error.get("code") if isinstance(error, dict) else None
                    failed = rejected(message) if code in (400, 413, 422) else f"vLLM failed: {message}"
                    yield Delta(done=Generation(text="", error=failed))
                    return
                for delta in stream.read(event):
                    yield delta
        yield Delta(done=stream.generation())


def _event(item: Any) -> dict[str, Any]:
    """One streamed item as a dict: an SSE string (`data: {...}`), or a response or error object."""
    if isinstance(item, str):
        data = item.strip().removeprefix("data:").strip()
        return {} if not data or data == "[DONE]" else json.loads(data)
    if hasattr(item, "model_dump"):
        dumped = item.model_dump()
        return {"error": dumped} if type(item).__name__ == "ErrorResponse" else dumped
    return dict(item)


ENGINE = VLLMEngine()
