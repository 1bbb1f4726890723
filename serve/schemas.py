"""Request and response models of the app's own routes (retrieve, answer, methods, ready); those of the OpenAI-shaped
routes (/generate, /v1/...) are serve/openai_api.py's. Their field descriptions make up the OpenAPI schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Limits on what one request may ask for.
MAX_QUESTION_CHARS = 2_000
MAX_K = 20
MAX_BODY_BYTES = 64 * 1024
MAX_MESSAGES = 32
MAX_GENERATE_TOKENS = 2_048
MAX_TIMEOUT_MS = 600_000


#: Request fields renamed since they were released: the old name is refused with one line naming its successor.
RENAMED_FIELDS = {"subset": "corpus"}


class StrictRequest(BaseModel):
    """Requests reject unknown fields and values of the wrong JSON type (no silent coercion); a renamed field is
    answered with its successor's name."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in RENAMED_FIELDS.items():
                if old in data and new in cls.model_fields:
                    raise ValueError(f"`{old}` is now `{new}`")
        return data


class _QuestionRequest(StrictRequest):
    """The fields /retrieve and /answer share."""

    question: str = Field(
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        description=f"the question to retrieve contexts for (1 to {MAX_QUESTION_CHARS:,} characters)",
        examples=["What was the percentage change in net revenue from 2014 to 2015?"],
    )
    k: int | None = Field(
        None, ge=1, le=MAX_K, description=f"how many contexts to return (1 to {MAX_K}); default: the app's `default_k`"
    )
    corpus: str | None = Field(
        None,
        description="the corpus searched: a loaded subset's contexts (its name, e.g. FinQA) or `pooled` (every loaded "
        "subset's); omitted: the only loaded subset, else `pooled`",
        examples=["FinQA"],
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class RetrieveRequest(_QuestionRequest):
    method: str = Field(description="a retrieval method served by this app (see GET /methods)", examples=["bm25"])
    with_text: bool = Field(False, description="return each context's text too (default: ids and scores only)")


class AnswerRequest(_QuestionRequest):
    method: str = Field(
        description="any method served by this app (see GET /methods); `oracle` reads the context given by "
        "`context_id`, `pretrained_only` reads none",
        examples=["bm25"],
    )
    context_id: str | None = Field(
        None, max_length=512, description="the gold context to read; required by, and only allowed with, `oracle`"
    )


class Context(BaseModel):
    context_id: str = Field(description="the context's id in the benchmark")
    subset: str = Field(description="the subset the context belongs to")
    score: float | None = Field(description="the retriever's score (higher ranks first); null for a given context")
    text: str | None = Field(
        None, description="the context text (report text and table); on /retrieve only when `with_text` is true"
    )


class RetrieveResponse(BaseModel):
    method: str = Field(description="the retrieval method used")
    corpus: str = Field(description="the corpus searched: a subset's name, or `pooled`")
    contexts: list[Context] = Field(description="the top-k contexts, best first")


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="prompt tokens the engine reused instead of computing")


class Usage(BaseModel):
    """Token counts of a generation, as OpenAI's usage object (every reply that generates carries one)."""

    prompt_tokens: int = Field(description="tokens in the prompt")
    completion_tokens: int = Field(description="tokens generated")
    total_tokens: int = Field(description="prompt plus completion tokens")
    prompt_tokens_details: PromptTokensDetails | None = Field(
        None, description="where the engine reported how much of the prompt it reused"
    )

    @classmethod
    def of(cls, generation: dict[str, Any]) -> Usage:
        """The usage of a generation (its generation columns)."""
        prompt, completion = generation.get("prompt_tokens") or 0, generation.get("completion_tokens") or 0
        cached = generation.get("cached_prompt_tokens")
        details = None if cached is None else PromptTokensDetails(cached_tokens=cached)
        return cls(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion,
                   prompt_tokens_details=details)  # fmt: skip


class Timings(BaseModel):
    retrieval_s: float = Field(description="seconds spent retrieving (0 for methods that do not retrieve)")
    generation_s: float = Field(description="seconds spent waiting for the generator")
    total_s: float = Field(description="seconds from receiving the request to answering it")


class AnswerResponse(BaseModel):
    method: str = Field(description="the method used")
    corpus: str = Field(description="the corpus searched: a subset's name, or `pooled`")
    prediction: float | None = Field(description="the answer number: the evaluated formula, else the model's number")
    prediction_source: str | None = Field(description="where the prediction came from (e.g. the formula)")
    formula: str | None = Field(description="the model's final formula")
    reasoning_steps: list[str] = Field(description="the model's reasoning steps")
    json_ok: bool = Field(description="whether the model's output was valid JSON")
    formula_ok: bool = Field(description="whether the formula could be evaluated")
    raw_output: str = Field(description="the generator's text, unparsed")
    contexts: list[Context] = Field(description="the contexts the generator read, in prompt order")
    usage: Usage = Field(description="token counts of the generation")
    timings: Timings = Field(description="where the time went")


class MethodInfo(BaseModel):
    name: str = Field(description="the method's name, as passed in `method`")
    description: str = Field(description="what the method does")
    retrieves: bool = Field(description="whether the method retrieves (usable with POST /retrieve)")
    needs_generator: bool = Field(description="whether the method is answer-only, i.e. useless without a generator")
    needs_context_id: bool = Field(description="whether POST /answer needs `context_id` for this method")
    endpoints: list[str] = Field(description="the endpoints that accept this method")


class MethodsResponse(BaseModel):
    methods: list[MethodInfo] = Field(description="the methods this app serves")
    subsets: list[str] = Field(description="the loaded subsets")
    corpora: list[str] = Field(
        description="the corpora a request may name in `corpus`: each loaded subset's, and "
        "`pooled` when several are loaded"
    )
    default_corpus: str = Field(description="the corpus searched when a request names none")
    generator: str | None = Field(description="the generator's model, or null when the app has none")
    default_k: int = Field(description="the `k` of a request that sets none: the served run config's retrieval.k")
    max_k: int = Field(description="the largest allowed `k`")


class HealthResponse(BaseModel):
    status: Literal["ok"] = Field(description="`ok` while the ingress is up")


class ReadyResponse(BaseModel):
    status: Literal["ready", "starting", "unhealthy"] = Field(
        description="`ready` when every deployment of the app has all its replicas running (HTTP 200, else 503)"
    )
    deployments: dict[str, str] = Field(description="each deployment's Serve status, e.g. HEALTHY or UPDATING")


class ErrorResponse(BaseModel):
    error: str = Field(description="a one-line reason")
