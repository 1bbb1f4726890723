"""Ray Data stages: callable classes (one RAGSystem per actor, built once) and plain batch functions.

Every stage takes and returns a pyarrow batch. Input rows carry `id, subset, method, question, query_text,
context_id, gold_context, reference`; each stage adds its columns (null where a row's method has no use for the
stage). All retrieval, prompt, parsing and scoring logic is t2rag's; this module only moves columns.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ray_jobs.common import report
from t2rag.config import RunConfig
from t2rag.generation.vllm_ray import request_from_row, request_row
from t2rag.methods import get_method
from t2rag.pipeline.answering import hyde_requests, score_outputs
from t2rag.pipeline.records import RECORD_SCHEMA
from t2rag.pipeline.steps import retrieval_columns
from t2rag.retrieval import Hits, QueryBlock
from t2rag.retrieval.base import result_depth
from t2rag.retrieval.config import needs_query_vectors
from t2rag.system import RAGSystem

VECTOR_TYPE = pa.list_(pa.float32())


def groups(batch: pa.Table, *keys: str) -> Iterator[tuple[tuple[str, ...], np.ndarray]]:
    """Row positions of each distinct key combination in a batch (one Python step per group, not per row)."""
    if batch.num_rows == 0:
        return
    grouped = batch.select(list(keys)).append_column("_row", pa.array(np.arange(batch.num_rows))).group_by(list(keys))
    for row in grouped.aggregate([("_row", "list")]).to_pylist():
        yield tuple(row[k] for k in keys), np.asarray(row["_row_list"], dtype=np.int64)


def set_rows(column: list, rows: np.ndarray, values: list) -> None:
    for i, value in zip(rows.tolist(), values, strict=True):
        column[i] = value


def with_columns(batch: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    for name, values in columns.items():
        if name in batch.column_names:
            batch = batch.set_column(batch.schema.get_field_index(name), name, values)
        else:
            batch = batch.append_column(name, values)
    return batch


class SystemStage:
    """Base of stateful stages: the run config and a RAGSystem, created once per actor."""

    stage = "stage"

    def __init__(self, config_json: str):
        self.config = RunConfig.model_validate_json(config_json)
        self.system = RAGSystem(self.config)

    def __call__(self, batch: pa.Table) -> pa.Table:
        start = time.perf_counter()
        out = self.process(batch)
        report(self.stage, batch.num_rows, time.perf_counter() - start)
        return out

    def process(self, batch: pa.Table) -> pa.Table:
        raise NotImplementedError


class EmbedQueries(SystemStage):
    """Dense query vectors for rows whose retriever needs them (HyDE rows embed their document as a passage)."""

    stage = "embed_queries"

    def process(self, batch: pa.Table) -> pa.Table:
        texts = batch.column("query_text").to_pylist()
        # Each distinct (text, template) is embedded once per batch, however many methods share it.
        wanted: dict[tuple[str, bool], list[int]] = {}
        for (method_name,), rows in groups(batch, "method"):
            method = get_method(method_name)
            if method.retriever and needs_query_vectors(method.retriever):
                for i in rows.tolist():
                    wanted.setdefault((texts[i], method.query == "hyde"), []).append(i)
        vectors: list = [None] * batch.num_rows
        for as_passage in (False, True):
            keys = [key for key in wanted if key[1] is as_passage]
            if not keys:
                continue
            embed = self.system.embedder.embed_passages if as_passage else self.system.embedder.embed_queries
            for key, vec in zip(keys, embed([text for text, _ in keys]), strict=True):
                for i in wanted[key]:
                    vectors[i] = vec
        return with_columns(batch, {"query_vector": pa.array(vectors, VECTOR_TYPE)})


class Retrieve(SystemStage):
    """Search each (method, subset) group of a batch at once; the reranker's rows get their dense pool."""

    stage = "retrieve"

    def process(self, batch: pa.Table) -> pa.Table:
        n = batch.num_rows
        cols: dict[str, list] = {"context_ids": [None] * n, "scores": [None] * n, "gold_rank": [None] * n}
        pool: list = [None] * n
        questions = batch.column("question").to_pylist()
        vectors = batch.column("query_vector").to_pylist() if "query_vector" in batch.column_names else [None] * n
        gold = batch.column("context_id").to_pylist()
        k = self.config.retrieval.k
        for (method_name, subset), rows in groups(batch, "method", "subset"):
            method = get_method(method_name)
            if not method.retrieves:
                continue
            retriever = self.system.retriever(method, subset)
            block = QueryBlock([questions[i] for i in rows])
            if retriever.needs_query_vectors:
                block.vectors = np.asarray([vectors[i] for i in rows], dtype=np.float32)
            if method.retriever == "reranker":
                hits = retriever.pool(block, k)
                set_rows(pool, rows, hits.context_ids(retriever.corpus))
                continue
            hits = retriever.search(block, k)
            for name, values in retrieval_columns(hits, retriever.corpus, [gold[i] for i in rows]).items():
                set_rows(cols[name], rows, values)
        return with_columns(
            batch,
            {
                "context_ids": pa.array(cols["context_ids"], pa.list_(pa.string())),
                "scores": pa.array(cols["scores"], pa.list_(pa.float64())),
                "gold_rank": pa.array(cols["gold_rank"], pa.int32()),
                "pool_ids": pa.array(pool, pa.list_(pa.string())),
            },
        )


class Rerank(SystemStage):
    """Cross-encoder reranking of the dense pools (GPU actors on clusters)."""

    stage = "rerank"

    def process(self, batch: pa.Table) -> pa.Table:
        pools = batch.column("pool_ids").to_pylist()
        if all(p is None for p in pools):
            return batch
        cols = {name: batch.column(name).to_pylist() for name in ("context_ids", "scores", "gold_rank")}
        questions = batch.column("question").to_pylist()
        gold = batch.column("context_id").to_pylist()
        k = self.config.retrieval.k
        for (method_name, subset), rows in groups(batch, "method", "subset"):
            rows = np.asarray([i for i in rows if pools[i] is not None], dtype=np.int64)
            if not len(rows):
                continue
            retriever = self.system.retriever(get_method(method_name), subset)
            corpus = retriever.corpus
            position = {cid: i for i, cid in enumerate(corpus.context_ids)}
            width = max(len(pools[i]) for i in rows)
            idx = np.full((len(rows), width), -1, dtype=np.int64)
            for r, i in enumerate(rows):
                idx[r, : len(pools[i])] = [position[c] for c in pools[i]]
            pool = Hits(idx, np.full(idx.shape, np.nan))
            hits = retriever.scorer.rerank([questions[i] for i in rows], pool, corpus, result_depth(k))
            for name, values in retrieval_columns(hits, corpus, [gold[i] for i in rows]).items():
                set_rows(cols[name], rows, values)
        return with_columns(
            batch,
            {
                "context_ids": pa.array(cols["context_ids"], pa.list_(pa.string())),
                "scores": pa.array(cols["scores"], pa.list_(pa.float64())),
                "gold_rank": pa.array(cols["gold_rank"], pa.int32()),
            },
        )


class BuildPrompts(SystemStage):
    """The answer prompt of every row, from the texts its method reads."""

    stage = "prompts"

    def process(self, batch: pa.Table) -> pa.Table:
        n = batch.num_rows
        out: dict[str, list] = {"messages_json": [None] * n, "params_json": [None] * n, "table_text": [None] * n}
        out["prompt_hash"] = [None] * n
        for (method_name, subset), rows in groups(batch, "method", "subset"):
            method = get_method(method_name)
            part = batch.take(rows)
            # Only retrieving methods have rankings (groups that never retrieve carry no context_ids column).
            ranked = part.column("context_ids").to_pylist() if method.retrieves else None
            contexts = self.system.contexts(method, subset, part.column("gold_context").to_pylist(), ranked)
            requests = self.system.answer_requests(part.column("question").to_pylist(), contexts)
            prompt_rows = [request_row(r) for r in requests]
            set_rows(out["messages_json"], rows, [p["messages_json"] for p in prompt_rows])
            set_rows(out["params_json"], rows, [p["params_json"] for p in prompt_rows])
            set_rows(out["table_text"], rows, ["\n\n".join(c) if c else None for c in contexts])
            set_rows(out["prompt_hash"], rows, [r.prompt_hash() for r in requests])
        return with_columns(batch, {k: pa.array(v, pa.string()) for k, v in out.items()})


class HydePrompts(SystemStage):
    """Prompts asking the generator for a hypothetical report excerpt per question."""

    stage = "hyde_prompts"

    def process(self, batch: pa.Table) -> pa.Table:
        requests = hyde_requests(
            self.system.prompts, batch.column("question").to_pylist(), self.system.generator_config
        )
        rows = [request_row(r) for r in requests]
        return with_columns(
            batch,
            {
                "messages_json": pa.array([r["messages_json"] for r in rows], pa.string()),
                "params_json": pa.array([r["params_json"] for r in rows], pa.string()),
            },
        )


GENERATION_COLUMNS = {
    "raw_output": pa.string(),
    "prompt_tokens": pa.int32(),
    "completion_tokens": pa.int32(),
    "generation_s": pa.float64(),
    "generation_error": pa.string(),
}


class LocalGenerate(SystemStage):
    """The llama.cpp or OpenAI-compatible HTTP engine in an actor (the model loads once per actor)."""

    stage = "generate"

    def process(self, batch: pa.Table) -> pa.Table:
        requests = [request_from_row(row) for row in batch.select(["messages_json", "params_json"]).to_pylist()]
        gens = self.system.generator.generate(requests)
        values = {
            "raw_output": [g.text for g in gens],
            "prompt_tokens": [g.prompt_tokens for g in gens],
            "completion_tokens": [g.completion_tokens for g in gens],
            "generation_s": [round(g.seconds, 4) for g in gens],
            "generation_error": [g.error for g in gens],
        }
        return with_columns(batch, {k: pa.array(v, GENERATION_COLUMNS[k]) for k, v in values.items()})


def hyde_to_query(batch: pa.Table) -> pa.Table:
    """Use the generated excerpt as the query text (the question itself when generation failed)."""
    docs = batch.column("raw_output").to_pylist()
    questions = batch.column("question").to_pylist()
    query = [d if d else q for d, q in zip(docs, questions, strict=True)]
    drop = [c for c in [*GENERATION_COLUMNS, "messages_json", "params_json"] if c in batch.column_names]
    return with_columns(batch.drop_columns(drop), {"query_text": pa.array(query, pa.string())})


def parse_answers(batch: pa.Table) -> pa.Table:
    """Parse and score every generated output (t2rag's answer module and Number Match)."""
    start = time.perf_counter()
    for name, dtype in GENERATION_COLUMNS.items():  # vLLM's processor reports no timing
        if name not in batch.column_names:
            batch = batch.append_column(name, pa.nulls(batch.num_rows, dtype))
    scored = score_outputs(
        batch.column("raw_output").to_pylist(),
        batch.column("table_text").to_pylist(),
        batch.column("reference").to_pylist(),
    )
    out = with_columns(batch, {k: pa.array(v, RECORD_SCHEMA.field(k).type) for k, v in scored.items()})
    report("parse", batch.num_rows, time.perf_counter() - start)
    return out


def to_records(batch: pa.Table) -> pa.Table:
    """Project a batch onto the record schema (absent columns are null)."""
    columns = {}
    for fld in RECORD_SCHEMA:
        if fld.name in batch.column_names:
            columns[fld.name] = pc.cast(batch.column(fld.name), fld.type)
        else:
            columns[fld.name] = pa.nulls(batch.num_rows, fld.type)
    return pa.table(columns, schema=RECORD_SCHEMA)
