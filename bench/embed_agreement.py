"""Do the project's default embedding path and an fp32 reference agree on the bundled sample?

    python bench/embed_agreement.py                     # the offline MiniLM on this machine's device
    python bench/embed_agreement.py --model DIR --json  # another model; the figures as one JSON document

Embeds every subset's contexts and questions twice on the same device: with the device's defaults (on CUDA bf16 and
token ids made ahead in batches by token budget; on CPU fp32 through sentence-transformers) and with the fp32
reference (sentence-transformers' own `encode`). Prints, per subset, the cosine between the two vectors of each text
(lowest and median), the share of questions whose top-k contexts come back in the same order, and recall@k and
MRR@k of each path from an exact dot-product search. On CPU the two paths are the same code, so the vectors must be
bit-identical; on a GPU they agree within bf16 rounding.
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def top_k(queries: np.ndarray, passages: np.ndarray, k: int) -> np.ndarray:
    from t2rag.retrieval.ranking import top_n

    return top_n(queries @ passages.T, k)[0]


def metrics(order: np.ndarray, context_ids: tuple[str, ...], gold: list[str], k: int) -> dict:
    from t2rag.metrics.retrieval import gold_ranks, mrr_at_k, recall_at_k

    ranks = gold_ranks([[context_ids[i] for i in row] for row in order], gold)
    return {f"recall@{k}": round(recall_at_k(ranks, k), 4), f"mrr@{k}": round(mrr_at_k(ranks, k), 4)}


def cosines(a: np.ndarray, b: np.ndarray) -> dict:
    cos = np.sum(a * b, axis=1)  # both normalised
    return {"min": round(float(cos.min()), 6), "median": round(float(np.median(cos)), 6)}


def main() -> None:
    from t2rag.data import build_corpora, load_questions
    from t2rag.retrieval import Embedder, EmbedderConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args()

    project = Embedder(EmbedderConfig(model=args.model))
    reference = Embedder(EmbedderConfig(model=args.model, dtype="float32", tokenize_ahead=False))
    result = {
        "device": str(project.model.device),
        "project": {"dtype": str(next(project.model.parameters()).dtype), "tokenize_ahead": project.tokenize_ahead},
        "subsets": {},
    }
    questions = load_questions(None)
    for subset, corpus in build_corpora(questions).items():
        table = questions.subset(subset).scored()
        asked, gold = table.column("question").to_pylist(), table.column("context_id").to_pylist()
        vectors = {
            name: (embedder.embed_passages(corpus.texts), embedder.embed_queries(asked))
            for name, embedder in (("project", project), ("reference", reference))
        }
        orders = {name: top_k(q, p, args.k) for name, (p, q) in vectors.items()}
        result["subsets"][subset] = {
            "contexts": len(corpus),
            "questions": len(asked),
            "bit_identical": all(np.array_equal(a, b) for a, b in zip(*vectors.values(), strict=True)),
            "passage_cosine": cosines(vectors["project"][0], vectors["reference"][0]),
            "query_cosine": cosines(vectors["project"][1], vectors["reference"][1]),
            f"same_top{args.k}": round(float(np.mean(np.all(orders["project"] == orders["reference"], axis=1))), 4),
            **{name: metrics(order, corpus.context_ids, gold, args.k) for name, order in orders.items()},
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"device {result['device']}, project path {result['project']}")
    for subset, r in result["subsets"].items():
        print(
            f"{subset:9} {r['contexts']} contexts, {r['questions']} questions: bit-identical {r['bit_identical']}, "
            f"cosine passages {r['passage_cosine']}, queries {r['query_cosine']}, same top-{args.k} "
            f"{r[f'same_top{args.k}']}; project {r['project']}, reference {r['reference']}"
        )


if __name__ == "__main__":
    main()
