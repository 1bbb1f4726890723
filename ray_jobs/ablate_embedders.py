"""Embedding-model ablation (the paper's Table 4): Base-RAG with k = 5 for a list of embedders.

    python -m ray_jobs.ablate_embedders --config configs/retrieval.yaml \
        --models all-MiniLM-L6-v2,intfloat/multilingual-e5-large-instruct

Each model is one Ray task (with the GPUs of `ray.embed_gpus`) running the retrieval-only evaluation of the
`base` method into `ablations/embedders/<model>/` under the run's `out`; the table of R@1, R@5 and MRR@5,
per subset and weighted over subsets, goes to `ablations/embedders.csv` and `.md`.
"""

from __future__ import annotations

import argparse
import logging

from ray_jobs.durable import start_job
from t2rag.config import RunConfig
from t2rag.pipeline.local import run_local
from t2rag.reference import TABLE4_METRICS
from t2rag.results.tables import markdown_table
from t2rag.retrieval import EmbedderConfig
from t2rag.storage import join, write_bytes

log = logging.getLogger("t2rag.progress")


def model_slug(embedder: EmbedderConfig) -> str:
    return embedder.cache_key


def evaluate_embedder(config_json: str) -> dict:
    """Retrieval-only Base-RAG evaluation with one embedder (runs as a Ray task)."""
    return run_local(RunConfig.model_validate_json(config_json), overwrite=True)


def cell_config(config: RunConfig, embedder: EmbedderConfig) -> RunConfig:
    retrieval = config.retrieval.model_copy(update={"embedder": embedder, "k": 5})
    return config.model_copy(
        update={
            "methods": ["base"],
            "retrieval_only": True,
            "retrieval": retrieval,
            "runner": "local",
            "out": join(config.out, "ablations", "embedders", model_slug(embedder)),
        }
    )


def ablate_embedders(config: RunConfig, embedders: list[EmbedderConfig]) -> dict[str, str]:
    """Evaluate every embedder in parallel; write the Table 4 CSV and markdown; returns their paths."""
    import ray

    task = ray.remote(num_gpus=config.ray.embed_gpus, num_cpus=1)(evaluate_embedder)
    configs = [cell_config(config, e) for e in embedders]
    results = ray.get([task.remote(c.model_dump_json()) for c in configs])
    header = ["model", "max_seq_length"]
    subsets = list(results[0]["methods"]["base"]["subsets"]) if results else []
    for name in [*subsets, "weighted"]:
        header += [f"{name} {m}" for m in TABLE4_METRICS]
    rows = []
    for embedder, result in zip(embedders, results, strict=True):
        scorecard = result["methods"]["base"]
        row: list[object] = [embedder.model, embedder.max_seq_length or "model default"]
        for name in [*subsets, "weighted"]:
            entry = scorecard["weighted"] if name == "weighted" else scorecard["subsets"][name]
            row += [entry[m] for m in TABLE4_METRICS]
        rows.append(row)
    csv = ",".join(header) + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n"
    paths = {
        "csv": join(config.out, "ablations", "embedders.csv"),
        "markdown": join(config.out, "ablations", "embedders.md"),
    }
    write_bytes(paths["csv"], csv.encode())
    write_bytes(paths["markdown"], (markdown_table(header, rows) + "\n").encode())
    return paths


def parse_models(spec: str) -> list[EmbedderConfig]:
    """Comma-separated model names; `name:N` sets max_seq_length N."""
    out = []
    for item in spec.split(","):
        name, _, length = item.strip().partition(":")
        out.append(EmbedderConfig(model=name, max_seq_length=int(length) if length else None))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument(
        "--models", required=True, help="comma-separated embedders, e.g. all-MiniLM-L6-v2,all-MiniLM-L6-v2:128"
    )
    args = parser.parse_args(argv)
    config = start_job(args.config)
    for name, path in ablate_embedders(config, parse_models(args.models)).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
