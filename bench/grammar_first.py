"""JSON-constrained decoding on llama.cpp: llama-cpp-python's sampler chain (the grammar masks the whole vocabulary
at every step) against t2rag's grammar-first greedy sampler (`t2rag.generation.grammar_first`), on real answer
prompts of the FinQA dev sample, alternating the two so both see the same machine. Prints decode tokens/s of each,
their ratio, whether every answer is the same, and how often the greedy token broke the grammar.

    .venv/bin/python bench/grammar_first.py [--model qwen2.5-coder-0.5b] [--prompts 4] [--max-tokens 160] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def answer_prompts(count: int) -> list[list[dict[str, str]]]:
    """The oracle's answer prompts (the packaged templates, contexts clipped to 1,000 characters) of the first
    `count` FinQA dev questions of the bundled sample."""
    from t2rag.data.load import load_questions
    from t2rag.prompts import PromptConfig, Prompts

    rows = load_questions(subsets=["FinQA"], split="dev").table.slice(0, count).to_pylist()
    prompts = Prompts(PromptConfig(max_context_chars=1000))
    return [list(prompts.answer(r["question"], [r["context"]])) for r in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a packaged GGUF model or a .gguf path")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)

    from llama_cpp import Llama

    from t2rag.generation.grammar_first import grammar_first
    from t2rag.generation.models import resolve_gguf
    from t2rag.prompts import ANSWER_SCHEMA

    llm = Llama(model_path=str(resolve_gguf(args.model)), n_ctx=4096, n_threads=os.cpu_count(), verbose=False)
    options = {"temperature": 0.0, "max_tokens": args.max_tokens,
               "response_format": {"type": "json_object", "schema": ANSWER_SCHEMA}}  # fmt: skip
    seconds = {"chain": 0.0, "grammar_first": 0.0}
    tokens = {"chain": 0, "grammar_first": 0}
    texts: dict[str, list[str]] = {"chain": [], "grammar_first": []}
    steps = masked = 0
    for messages in answer_prompts(args.prompts):
        for way in ("chain", "grammar_first"):
            llm.reset()  # the prompt computed afresh for each way (so both start from the same logits), off the clock
            llm.create_chat_completion(messages=messages, max_tokens=1)
            with grammar_first(llm) if way == "grammar_first" else nullcontext([]) as used:
                started = time.perf_counter()
                out = llm.create_chat_completion(messages=messages, **options)
                seconds[way] += time.perf_counter() - started
            tokens[way] += out["usage"]["completion_tokens"]
            texts[way].append(out["choices"][0]["message"]["content"])
            for sampler in used:
                steps, masked = steps + sampler.steps, masked + sampler.masked_steps
    rate = {way: tokens[way] / seconds[way] for way in seconds}
    result = {
        "model": args.model,
        "prompts": args.prompts,
        "completion_tokens": tokens["chain"],
        "chain_tokens_per_s": round(rate["chain"], 2),
        "grammar_first_tokens_per_s": round(rate["grammar_first"], 2),
        "speedup": round(rate["grammar_first"] / rate["chain"], 3),
        "same_answers": texts["chain"] == texts["grammar_first"],
        "masked_step_share": round(masked / steps, 4) if steps else None,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.model}, {args.prompts} FinQA dev answer prompts, {tokens['chain']} tokens each way")
        broke = 100 * (result["masked_step_share"] or 0)
        print(f"decode tokens/s: chain {rate['chain']:.2f}, grammar-first {rate['grammar_first']:.2f}"
              f" ({result['speedup']:.2f}x); same answers: {result['same_answers']};"
              f" greedy token broke the grammar at {broke:.1f}% of steps")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
