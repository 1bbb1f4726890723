"""The embedder's precision (float32 on CPU by default, whatever the checkpoint was saved in) and its CPU threads."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from t2rag.retrieval import Embedder, EmbedderConfig
from t2rag.retrieval.dense.embedder import model_dtype, resolve_model_path


def test_default_precision_is_bf16_on_cuda_and_fp32_elsewhere():
    assert model_dtype("cuda:0", None) == "bfloat16"
    assert model_dtype("cpu", None) == "float32"
    assert model_dtype("cuda", "float16") == "float16"


def test_a_half_precision_checkpoint_runs_in_fp32_on_cpu(minilm, tmp_path):
    """A checkpoint saved in fp16 (as many on the hub are) is loaded in float32 on CPU, not run in half precision."""
    from safetensors.torch import load_file, save_file

    source = Path(resolve_model_path("all-MiniLM-L6-v2"))
    half = tmp_path / "minilm-fp16"
    shutil.copytree(source, half, ignore=shutil.ignore_patterns("model.safetensors"))
    weights = load_file(source / "model.safetensors")
    save_file({k: v.half().contiguous() for k, v in weights.items()}, half / "model.safetensors", {"format": "pt"})

    embedder = Embedder(EmbedderConfig(model=str(half), device="cpu"))
    assert next(embedder.model.parameters()).dtype == torch.float32
    texts = ["Net revenue rose 12% in 2019.", "What was the change in net revenue?"]
    # fp16-rounded weights computed in fp32: the offline model's vectors to about fp16's precision.
    np.testing.assert_allclose(embedder.embed_passages(texts), minilm.embed_passages(texts), atol=2e-3)


def test_torch_threads_are_lowered_for_a_while_and_restored_after_an_error():
    """On CUDA the embedder runs its batches with one torch CPU thread; the process's setting comes back after."""
    from t2rag.retrieval.dense.embedder import _torch_threads

    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), _torch_threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("a batch failed")
    assert torch.get_num_threads() == before
    with _torch_threads(None):
        assert torch.get_num_threads() == before
