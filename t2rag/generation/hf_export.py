"""Export a packaged GGUF chat model to Hugging Face format, the format vLLM loads.

`python -m t2rag.generation.hf_export smollm2-135m DIR` writes DIR/config.json, the weights (safetensors) and the
tokenizer with its chat template. transformers reads GGUF files (dequantising them) but refuses to save a model it
marks as GGUF-quantised, so the weights are moved into a plain model built from the same config and saved from there.
Needs `gguf` and `accelerate` (the vLLM environment has them; `make vllm`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from t2rag.generation.models import models_dir, resolve_gguf


def hf_export_dir(model: str) -> Path:
    """Where a packaged model's Hugging Face export lives (beside the assembled GGUF files)."""
    return models_dir() / "hf" / model


def export_hf(model: str, out: Path, dtype: str = "bfloat16") -> Path:
    """Write `model` (a packaged model name or a .gguf path) to `out` in Hugging Face format; returns `out`.

    An existing export at `out` is reused. A new one is written to `out.partial` and renamed when complete, so an
    interrupted export is never taken for a finished one."""
    if out.is_dir():
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = resolve_gguf(model)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if not k.endswith("lm_head.weight")]:  # a tied head may be absent
        raise RuntimeError(f"{model}: weights do not fit the architecture (missing {missing}, extra {unexpected})")
    if missing:
        plain.tie_weights()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer.save_pretrained(partial)
    plain.save_pretrained(partial, safe_serialization=True)
    partial.rename(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="packaged model name (e.g. smollm2-135m) or a .gguf path")
    parser.add_argument("out", type=Path, nargs="?", help="output directory (default: the models cache)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = parser.parse_args(argv)
    print(export_hf(args.model, args.out or hf_export_dir(args.model), args.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
