"""An embedder's tokenizer without its model: token ids made on CPU workers for an embedder on a GPU.

On Ray, tokenizing actors (CPUs only) hand ids to the embedding actors (GPUs), so a GPU never waits on a tokenizer
(`ray_jobs.placement`). The ids are those the embedder would make itself: the same templates, tokenizer, window and
character cut (`t2rag.retrieval.dense.token_batches.WindowTokenizer`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from t2rag.model_access import loading
from t2rag.retrieval.dense.embedder import EmbedderConfig, resolve_model_path
from t2rag.retrieval.dense.token_batches import WindowTokenizer


@lru_cache(maxsize=4)
def _load_tokenizer(path: str):
    from transformers import AutoTokenizer

    with loading(path):
        return AutoTokenizer.from_pretrained(path)


def sentence_transformers_window(path: str) -> int | None:
    """The max_seq_length a sentence-transformers model declares (sentence_bert_config.json), if any."""
    local = Path(path) / "sentence_bert_config.json"
    if Path(path).is_dir():
        file = local if local.exists() else None
    else:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        try:
            file = Path(hf_hub_download(path, "sentence_bert_config.json"))
        except EntryNotFoundError:  # a plain transformers model has none
            file = None
    return json.loads(file.read_text()).get("max_seq_length") if file else None


class EmbedTokenizer:
    """Templates plus tokenizer of one embedder config: texts in, token ids out."""

    def __init__(self, config: EmbedderConfig | None = None):
        self.config = config or EmbedderConfig()
        path = resolve_model_path(self.config.model)
        self.tokenizer = _load_tokenizer(path)
        self.max_length = int(
            self.config.max_seq_length or sentence_transformers_window(path) or self.tokenizer.model_max_length
        )
        self.window = WindowTokenizer(self.tokenizer, self.max_length)
        self.query_template, self.passage_template = self.config.templates()

    def passages(self, texts: Sequence[str]) -> list[list[int]]:
        return self.window([self.passage_template.format(text=t) for t in texts])

    def queries(self, texts: Sequence[str]) -> list[list[int]]:
        return self.window([self.query_template.format(text=t) for t in texts])
