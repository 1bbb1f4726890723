"""In-process llama.cpp engine (CPU) over a GGUF chat model."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

# llama.cpp's OpenMP threads busy-wait between steps; on a shared machine (Ray workers, other jobs) that spinning
# slows every step (docs/performance.md, "Why the defaults in the code"). Passive waiting costs nothing on an idle
# machine. It must be set before llama.cpp loads its OpenMP runtime; an explicit setting in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from t2rag.generation.base import ChatRequest, Delta, Generation, Generator, Message, log_batch, rejected
from t2rag.generation.config import GeneratorConfig
from t2rag.generation.engine import Batching, Engine
from t2rag.generation.grammar_first import grammar_first
from t2rag.generation.models import PACKAGED_MODELS, packaged_availability, resolve_gguf
from t2rag.model_access import Availability
from t2rag.model_loads import record_load

log = logging.getLogger(__name__)

# llama.cpp's own message when the prompt alone overflows the window.
_OVERFLOW = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


class LlamaCppConfig(GeneratorConfig):
    """llama.cpp in this process, on CPU."""

    engine: Literal["llamacpp"] = "llamacpp"
    n_ctx: int = 8192
    n_threads: int | None = None  # None: all cores
    n_batch: int = 512
    #: Reuse the evaluated prefix of the previous prompt (the shared system prompt). Off, every prompt is evaluated
    #: afresh: slower, but an answer never depends on the requests before it (the served app runs so).
    prompt_cache: bool = True


class LlamaCppEngine(Engine):
    name = "llamacpp"
    config_class = LlamaCppConfig
    packages = ("llama_cpp_python",)

    def build(self, config: LlamaCppConfig) -> Generator:
        return LlamaCppGenerator(config)

    def batching(self, config: LlamaCppConfig) -> Batching:
        return "one_at_a_time"

    def for_serving(self, config: LlamaCppConfig) -> LlamaCppConfig:
        return config.model_copy(update={"prompt_cache": False})

    def weights(self, config: LlamaCppConfig) -> Availability:
        return packaged_availability(config.model)


class ContextOverflow(Exception):
    """The prompt plus the completion budget does not fit in the context window."""

    def __init__(self, prompt_tokens: int, n_ctx: int):
        super().__init__(rejected(f"prompt of {prompt_tokens} tokens exceeds the context window of {n_ctx}"))
        self.prompt_tokens = prompt_tokens


def gguf_file_name(model: str) -> str:
    """The GGUF file name `resolve_gguf` yields, without resolving (which may assemble a multi-part model)."""
    spec = PACKAGED_MODELS.get(model)
    if spec is None:
        return Path(model).name
    if spec.file_in_package:
        return spec.file_in_package[1]
    return f"{spec.name}.gguf"


class LlamaCppGenerator(Generator):
    """Runs chat requests one after another on a lazily loaded `llama_cpp.Llama`.

    Requests run sequentially on one model instance so llama.cpp reuses the KV cache of the prompt prefix the
    consecutive prompts share (the long system prompt).
    """

    engine = "llamacpp"

    def __init__(self, config: LlamaCppConfig):
        self.config = config
        self._llm: Any = None
        self._formatter: Any = None  # renders messages as the model's chat template, for token counting
        self._lock = threading.RLock()  # a Llama instance is not safe to share between threads

    @property
    def model_id(self) -> str:
        return gguf_file_name(self.config.model)

    def load(self) -> None:
        with self._lock:
            self._load()

    def _load(self) -> Any:
        if self._llm is None:
            from llama_cpp import Llama

            path = resolve_gguf(self.config.model)
            kwargs: dict[str, Any] = {}
            if self.config.sampling.seed is not None:
                kwargs["seed"] = self.config.sampling.seed
            self._llm = Llama(
                model_path=str(path),
                n_ctx=self.config.n_ctx,
                n_threads=self.config.n_threads or os.cpu_count(),
                n_batch=self.config.n_batch,
                verbose=False,
                **kwargs,
            )
            self._formatter = _template_formatter(self._llm)
            record_load(self.config.model)
        return self._llm

    def generate(self, requests: Sequence[ChatRequest]) -> list[Generation]:
        if not requests:
            return []
        with self._lock:
            llm = self._load()
            started = time.perf_counter()
            results = [self._run_one(llm, request) for request in requests]
            elapsed = time.perf_counter() - started
        log_batch(self.engine, results, elapsed)
        return results

    def _run_one(self, llm: Any, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        try:
            self._check_fits(llm, request.messages, request.params.max_tokens)
            self._fresh(llm)
            with _prefill_counter(llm) as evaluated, grammar_first(llm):
                response = llm.create_chat_completion(**self._arguments(request))
        except ContextOverflow as exc:
            return Generation(text="", prompt_tokens=exc.prompt_tokens, error=str(exc))
        except Exception as exc:
            return Generation(text="", seconds=time.perf_counter() - started, error=_engine_error(exc))
        usage = response.get("usage") or {}
        choice = response["choices"][0]
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        return Generation(
            text=choice["message"].get("content") or "",
            prompt_tokens=prompt_tokens,
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.perf_counter() - started,
            finish_reason=choice.get("finish_reason"),
            cached_prompt_tokens=_reused(prompt_tokens, evaluated),
        )

    def _fresh(self, llm: Any) -> None:
        """Without the prompt cache, forget the evaluated prompt: llama.cpp would reuse its longest common prefix,
        and a prompt evaluated in other pieces can decode differently where two tokens nearly tie."""
        if not self.config.prompt_cache:
            llm.reset()

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        params = request.params
        kwargs: dict[str, Any] = {"messages": list(request.messages), **params.decoding()}
        if self.config.constrained_json and params.json_schema:
            kwargs["response_format"] = {"type": "json_object", "schema": params.json_schema}
        return kwargs

    def stream(self, request: ChatRequest) -> Iterator[Delta]:
        """Tokens as llama.cpp decodes them (one request at a time: the engine is not shared between threads)."""
        started = time.perf_counter()
        with self._lock:
            llm = self._load()
            try:
                prompt_tokens = self._check_fits(llm, request.messages, request.params.max_tokens)
                self._fresh(llm)
                pieces, finish = [], None
                with _prefill_counter(llm) as evaluated, grammar_first(llm):
                    for chunk in llm.create_chat_completion(**self._arguments(request), stream=True):
                        choice = chunk["choices"][0]
                        text = (choice.get("delta") or {}).get("content") or ""
                        finish = choice.get("finish_reason") or finish
                        if text:
                            pieces.append(text)
                            yield Delta(text)
            except ContextOverflow as exc:
                yield Delta(done=Generation(text="", prompt_tokens=exc.prompt_tokens, error=str(exc)))
                return
            except Exception as exc:
                yield Delta(done=Generation(text="", seconds=time.perf_counter() - started, error=_engine_error(exc)))
                return
            text = "".join(pieces)
            completion = len(llm.tokenize(text.encode("utf-8"), add_bos=False)) if text else 0
        yield Delta(
            done=Generation(
                text=text,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion,
                seconds=time.perf_counter() - started,
                finish_reason=finish,
                cached_prompt_tokens=_reused(prompt_tokens, evaluated),
            )
        )

    def _check_fits(self, llm: Any, messages: Sequence[Message], max_tokens: int) -> int:
        """The prompt's tokens; ContextOverflow when they and `max_tokens` exceed the window."""
        n_prompt = self.count_prompt_tokens(messages)
        if n_prompt + max_tokens > llm.n_ctx():
            raise ContextOverflow(n_prompt, llm.n_ctx())
        return n_prompt

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of the chat-formatted prompt, as llama.cpp will feed it to the model."""
        with self._lock:
            llm = self._load()
            if self._formatter is not None:
                prompt = self._formatter(messages=list(messages)).prompt
                return len(llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
            # A named chat format without a template to render: the message texts alone are a lower bound,
            # and llama.cpp still raises if the formatted prompt overflows.
            return sum(len(llm.tokenize(m.get("content", "").encode("utf-8"), add_bos=False)) for m in messages)

    def close(self) -> None:
        with self._lock:
            if self._llm is not None:
                self._llm.close()
            self._llm = None
            self._formatter = None


@contextmanager
def _prefill_counter(llm: Any) -> Iterator[list[int]]:
    """Counts the tokens of each `Llama.eval` call while the block runs. llama.cpp keeps the longest prefix the
    new prompt shares with the tokens it holds and evaluates the rest in its first call, so the prompt's length
    minus that call's tokens is what it reused (llama-cpp-python reports it only on its verbose stderr)."""
    calls: list[int] = []
    evaluate = llm.eval

    def counting(tokens: Any) -> Any:
        calls.append(len(tokens))
        return evaluate(tokens)

    llm.eval = counting
    try:
        yield calls
    finally:
        del llm.eval  # the class's method again


def _reused(prompt_tokens: int, evaluated: list[int]) -> int:
    """Prompt tokens llama.cpp did not evaluate (all of them when it evaluated none: the prompt was held whole)."""
    return max(0, prompt_tokens - evaluated[0]) if evaluated else prompt_tokens


def _template_formatter(llm: Any) -> Any:
    """The Jinja chat formatter llama.cpp builds from the GGUF's template, or None for a named chat format."""
    template = llm.metadata.get("tokenizer.chat_template")
    if llm.chat_format != "chat_template.default" or not template:
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    def token_text(token_id: int) -> str:
        return llm.detokenize([token_id], special=True).decode("utf-8", "replace") if token_id != -1 else ""

    return Jinja2ChatFormatter(
        template=template, eos_token=token_text(llm.token_eos()), bos_token=token_text(llm.token_bos())
    )


def _engine_error(exc: BaseException) -> str:
    match = _OVERFLOW.search(str(exc))
    if match:
        return str(ContextOverflow(int(match[1]), int(match[2])))
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


ENGINE = LlamaCppEngine()
