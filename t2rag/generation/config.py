"""Generator settings and the named presets (engines are built from them by `t2rag.generation.factory`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from t2rag.errors import ConfigError
from t2rag.generation.base import SamplingParams

Engine = Literal["llamacpp", "openai", "vllm"]


class GeneratorConfig(BaseModel):
    """Which engine and model generate answers, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    engine: Engine = "llamacpp"
    model: str = "smollm2-135m"  # llamacpp: a packaged model name or a .gguf path; otherwise the model id
    sampling: SamplingParams = SamplingParams()
    constrained_json: bool = True  # ask the engine to enforce the answer's JSON schema
    #: Schedule a run's generation by shared prompt prefix (t2rag.generation.prefix): prompts that begin alike run
    #: back to back on the same engine and each distinct prompt runs once. False keeps plan order and least-busy
    #: routing, to measure the saving side by side.
    prefix_reuse: bool = True
    # llama.cpp (in-process, CPU)
    n_ctx: int = 8192
    n_threads: int | None = None  # None: all cores
    n_batch: int = 512
    #: Reuse the evaluated prefix of the previous prompt (the shared system prompt). Off, every prompt is evaluated
    #: afresh: slower, but an answer never depends on the requests before it (the served app runs so).
    prompt_cache: bool = True
    # OpenAI-compatible HTTP servers (vLLM, Ray Serve LLM, llama.cpp's server)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this variable, never stored
    json_mode: Literal["json_schema", "json_object", "none"] = "json_schema"
    concurrency: int = Field(8, ge=1)
    timeout_s: float = Field(300.0, gt=0)
    max_retries: int = Field(5, ge=0)
    # vLLM through Ray Data's LLM processor (GPU clusters). `model` is a Hugging Face id or directory, or a packaged
    # model name (exported to Hugging Face format on first use, see t2rag.generation.hf_export).
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    replicas: int = Field(1, ge=1)
    batch_size: int = Field(32, ge=1)
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

    @property
    def one_prompt_at_a_time(self) -> bool:
        """The engine evaluates prompts one after another in this process (llama.cpp): a block of one row is as fast
        as a larger one and reports progress sooner."""
        return self.engine == "llamacpp"

    @property
    def schedules_batches(self) -> bool:
        """The engine batches many prompts itself (vLLM): a replica takes `batch_size` rows per call, may span
        tensor x pipeline parallel GPUs, and is served as Ray Serve LLM's deployment."""
        return self.engine == "vllm"

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one replica holds (0 on CPU)."""
        if not self.schedules_batches or self.device == "cpu":
            return 0
        return self.tensor_parallel_size * self.pipeline_parallel_size


#: Ready configurations, selectable by name (`--generator NAME`).
PRESETS: dict[str, GeneratorConfig] = {
    p.name: p
    for p in [
        GeneratorConfig(name="smollm2-135m", engine="llamacpp", model="smollm2-135m", n_ctx=8192),
        GeneratorConfig(name="qwen2.5-0.5b", engine="llamacpp", model="qwen2.5-coder-0.5b", n_ctx=8192),
        GeneratorConfig(name="qwen2.5-1.5b", engine="llamacpp", model="qwen2.5-coder-1.5b", n_ctx=8192),
        GeneratorConfig(name="openai", engine="openai", model="default", base_url="http://127.0.0.1:8000/v1"),
        GeneratorConfig(name="vllm", engine="vllm", model="Qwen/Qwen2.5-7B-Instruct"),
        # vLLM's CPU build (`make vllm`) on the packaged SmolLM2, exported to Hugging Face format.
        GeneratorConfig(
            name="vllm-cpu-smollm2",
            engine="vllm",
            model="smollm2-135m",
            dtype="float32",  # on CPUs without AVX-512 BF16, vLLM's CPU build falls back to slow bf16 matmuls
            max_model_len=4096,
            enforce_eager=True,
            device="cpu",
            enable_prefix_caching=False,
            batch_size=16,
            engine_env={"VLLM_CPU_KVCACHE_SPACE": "1"},
        ),
        # The paper's generators: 4-bit AWQ checkpoints on H100s.
        GeneratorConfig(
            name="llama-3.3-70b-awq",
            engine="vllm",
            model="casperhansen/llama-3.3-70b-instruct-awq",
            quantization="awq_marlin",
            tensor_parallel_size=2,
            max_model_len=16384,
            batch_size=64,
            accelerator_type="H100",
        ),
        GeneratorConfig(
            name="qwq-32b-awq",
            engine="vllm",
            model="Qwen/QwQ-32B-AWQ",
            quantization="awq_marlin",
            tensor_parallel_size=1,
            max_model_len=32768,
            batch_size=64,
            accelerator_type="H100",
            sampling=SamplingParams(temperature=0.0, max_tokens=8192),
            constrained_json=False,  # a reasoning model thinks first; the JSON is read from the end
        ),
    ]
}


def resolve_generator(spec: str | GeneratorConfig | dict | None) -> GeneratorConfig | None:
    """A preset name, a config mapping (optionally `preset: NAME` plus overrides) or a config."""
    if spec is None or isinstance(spec, GeneratorConfig):
        return spec
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise ConfigError(f"unknown generator '{spec}' (presets: {', '.join(PRESETS)})")
        return PRESETS[spec]
    spec = dict(spec)
    base = spec.pop("preset", None)
    if base is not None:
        if base not in PRESETS:
            raise ConfigError(f"unknown generator preset '{base}' (presets: {', '.join(PRESETS)})")
        merged = PRESETS[base].model_dump()
        if "sampling" in spec:
            spec["sampling"] = {**merged["sampling"], **spec["sampling"]}
        merged.update(spec)
        spec = merged
    return GeneratorConfig.model_validate(spec)
