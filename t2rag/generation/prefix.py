"""Generation in shared-prefix order: prompts that begin alike run back to back, and each distinct prompt once.

An engine reuses the computed prefix of a prompt it has just seen (llama.cpp keeps the previous prompt's tokens,
vLLM its prefix cache), so the order in which a run sends its prompts decides how much prefill is repeated. Sorting
the prompts' texts lexicographically lists them in the depth-first order of their prefix tree: every prompt follows
the one it shares the longest prefix with. The sort key is the request's `messages_json` (JSON keeps a shared text
prefix a shared string prefix), so no prompt changes: only when it runs.

`route_key` names a prompt's leading part (the system prompt and the start of the first user text: for an answer,
its first context), which several replicas use to send prompts that share it to the same engine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from t2rag.generation.base import ChatRequest, Generation, Generator

#: Characters of the last message that name a prompt's route: enough of an answer prompt's first context to tell
#: contexts apart, short of the question that follows the contexts.
ROUTE_CHARS = 1024


def prefix_order(keys: Sequence[str]) -> np.ndarray:
    """Positions of `keys` in prefix-tree order (a stable lexicographic sort)."""
    return np.asarray(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def route_key(messages: Sequence[dict[str, str]]) -> str:
    """A short hash of a prompt's leading part: every message but the last whole, then the last one's first
    `ROUTE_CHARS` characters."""
    head = [*messages[:-1], {**messages[-1], "content": messages[-1].get("content", "")[:ROUTE_CHARS]}]
    return hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()[:16]


def route_keys(messages_json: Sequence[str]) -> list[str]:
    """`route_key` of each request column value."""
    return [route_key(json.loads(m)) for m in messages_json]


def generate_shared(generator: Generator, requests: Sequence[ChatRequest], reuse: bool) -> list[Generation]:
    """One Generation per request, in order. With `reuse`, the engine gets each distinct request once, in prefix
    order, and a repeated request gets the first one's result with every prompt token counted as reused (nothing
    was computed for it); without, the requests go to the engine as given."""
    if not reuse or len(requests) < 2:
        return generator.generate(requests)
    texts = [json.dumps(list(r.messages)) for r in requests]
    keys = [(text, r.params.model_dump_json()) for text, r in zip(texts, requests, strict=True)]
    first: dict[tuple[str, str], int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    distinct = list(first.values())  # positions of each distinct request's first occurrence
    order = [distinct[i] for i in prefix_order([texts[i] for i in distinct])]
    ran = dict(zip(order, generator.generate([requests[i] for i in order]), strict=True))
    out = []
    for i, key in enumerate(keys):
        g = ran[first[key]]
        if first[key] != i and g.error is None:
            g = replace(g, cached_prompt_tokens=g.prompt_tokens, seconds=0.0)
        out.append(g)
    return out
