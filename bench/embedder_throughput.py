"""Embedding throughput: the model alone against the project's embedder, on real T2-RAGBench contexts and
questions, measured in one run.

    python bench/embedder_throughput.py                                   # MiniLM (offline weights), this device
    python bench/embedder_throughput.py --random e5-large --max-length 512 --contexts 20000   # on a GPU machine

- **model alone**: token ids made beforehand (not timed), length-sorted, `--model-batch` rows per batch, already on
  the device; only the forward passes are timed. The ceiling for this model, dtype and device.
- **sentence-transformers**: `Embedder` with `tokenize_ahead=False` (the path every release before this one took,
  and still the CPU default): `SentenceTransformer.encode`, which tokenizes between batches.
- **tokenize ahead**: `Embedder` with `tokenize_ahead=True` (the CUDA default): ids from a thread running ahead,
  batches by padded-token budget.

`--random ARCH` builds a random-weight model of that architecture (e5-large: XLM-R large; minilm: MiniLM-L6) with
the MiniLM tokenizer (or `--tokenizer DIR`), for machines without the weights: a forward pass takes as long with
random weights.
Each path embeds everything once to warm up (new shapes, allocator), then is timed on a second pass.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

ARCHITECTURES = {
    "e5-large": {  # intfloat/multilingual-e5-large-instruct
        "model_type": "xlm-roberta",
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 4096,
        "vocab_size": 250002,
        "max_position_embeddings": 514,
        "pad_token_id": 1,
    },
    "minilm": {  # sentence-transformers/all-MiniLM-L6-v2
        "model_type": "bert",
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "vocab_size": 30522,
        "max_position_embeddings": 512,
    },
}


def random_model(architecture: str, root: Path, tokenizer: str) -> str:
    """A sentence-transformers directory with random weights of the architecture and the given tokenizer."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    fields = dict(ARCHITECTURES[architecture])
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    AutoModel.from_config(config).save_pretrained(root / "hf")
    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(root / "hf")
    transformer = Transformer(str(root / "hf"))
    model = SentenceTransformer(modules=[transformer, Pooling(config.hidden_size, "mean")])
    model.save(str(root / "st"))
    return str(root / "st")


def texts_for(n_contexts: int, n_questions: int) -> tuple[list[str], list[str]]:
    from t2rag.data import build_corpora, load_questions

    questions = load_questions(None)
    contexts = [t for corpus in build_corpora(questions).values() for t in corpus.texts]
    asked = questions.table.column("question").to_pylist()
    return _repeat(contexts, n_contexts), _repeat(asked, n_questions)


def _repeat(items: list[str], n: int) -> list[str]:
    return [items[i % len(items)] for i in range(n)]


def model_alone(embedder, texts: list[str], batch_rows: int) -> float:
    """Texts per second of the forward passes alone (ids on the device beforehand, length-sorted batches)."""
    import torch

    model = embedder.model
    ids = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
    order = np.argsort([-len(x) for x in ids], kind="stable")
    batches = []
    for start in range(0, len(order), batch_rows):
        rows = [ids[i] for i in order[start : start + batch_rows]]
        width = len(rows[0])
        array = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros_like(array)
        for i, row in enumerate(rows):
            array[i, : len(row)], mask[i, : len(row)] = row, 1
        batches.append(
            {
                "modality": "text",
                "input_ids": torch.from_numpy(array).to(model.device),
                "attention_mask": torch.from_numpy(mask).to(model.device),
            }
        )

    def run() -> float:
        _sync(model.device)
        start = time.perf_counter()
        with torch.inference_mode():
            for features in batches:
                model.forward(dict(features))
        _sync(model.device)
        return time.perf_counter() - start

    run()  # warm-up
    return len(texts) / run()


def through(embedder, texts: list[str], queries: bool) -> float:
    encode = embedder.embed_queries if queries else embedder.embed_passages
    encode(texts)  # warm-up: every shape this run meets
    _sync(embedder.model.device)
    start = time.perf_counter()
    encode(texts)
    _sync(embedder.model.device)
    return len(texts) / (time.perf_counter() - start)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="an embedder preset, hub id or path")
    parser.add_argument("--random", choices=sorted(ARCHITECTURES), help="a random-weight model of this architecture")
    parser.add_argument(
        "--tokenizer", default=None, help="tokenizer directory for --random (default: the offline MiniLM package's)"
    )
    parser.add_argument("--contexts", type=int, default=600)
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--dtype", default=None, help="default: bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--model-batch", type=int, default=512, help="rows per batch for the model alone")
    parser.add_argument("--st-batch", type=int, default=32, help="rows per batch for sentence-transformers")
    args = parser.parse_args()

    import torch

    from t2rag.retrieval import Embedder, EmbedderConfig
    from t2rag.retrieval.embedder import resolve_model_path

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = args.tokenizer or resolve_model_path("all-MiniLM-L6-v2")
        model = random_model(args.random, Path(tmp), tokenizer) if args.random else args.model
        contexts, questions = texts_for(args.contexts, args.questions)
        common = {"model": model, "max_seq_length": args.max_length, "dtype": args.dtype}
        st = Embedder(EmbedderConfig(**common, tokenize_ahead=False, batch_size=args.st_batch))
        ahead = Embedder(EmbedderConfig(**common, tokenize_ahead=True))
        result = {
            "model": f"random {args.random}" if args.random else args.model,
            "device": str(st.model.device),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "dtype": str(next(st.model.parameters()).dtype),
            "max_length": args.max_length,
            "contexts": len(contexts),
            "questions": len(questions),
        }
        for kind, texts, queries in (("contexts", contexts, False), ("queries", questions, True)):
            alone = model_alone(st, texts, args.model_batch)
            figures = {
                "model_alone_per_s": round(alone, 1),
                "sentence_transformers_per_s": round(through(st, texts, queries), 1),
                "tokenize_ahead_per_s": round(through(ahead, texts, queries), 1),
            }
            figures["tokenize_ahead_over_model"] = round(figures["tokenize_ahead_per_s"] / alone, 3)
            figures["tokenize_ahead_over_st"] = round(
                figures["tokenize_ahead_per_s"] / figures["sentence_transformers_per_s"], 3
            )
            result[kind] = figures
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
