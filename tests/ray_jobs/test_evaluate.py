"""ray_jobs.evaluate against the single-process runner on real data (on S3), and its resume guarantees."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ray_jobs import evaluate
from ray_jobs.evaluate import run_ray
from ray_jobs.placement import merged_chain
from ray_jobs.table_blocks import input_tasks
from t2rag.config import load_config
from t2rag.pipeline import local
from t2rag.pipeline.local import run_local
from t2rag.resources import Resources
from t2rag.results.report import write_report
from t2rag.run_folder.files import read_records
from t2rag.stages.work import work_left
from tests.conftest import HASHING, upload_dir
from tests.ray_jobs.conftest import replica_holding_a_batch
from tests.scripted_server import scripted_for

pytestmark = pytest.mark.slow


def _config(source, out, system: str | None = None, **fields):
    ray = {"block_rows": 8, "retrieve_block_rows": 8, "retrieve_batch_size": 16}
    base = {"data": {"source": source}, "out": str(out), "ray": ray}
    # Short contexts (and, where given, a short answer system prompt) keep SmolLM2's prompts small on 2 CPU cores.
    base["prompts"] = {"max_context_chars": 500, "answer_system": system}
    base.update(fields)
    return load_config(None, base)


def _records(out: str) -> dict[tuple[str, str], tuple]:
    """(method, id) -> what must agree between engines: ranking, gold rank, prompt and prediction."""
    records = read_records(out).to_pydict()
    keys = zip(records["method"], records["id"], strict=True)
    values = zip(
        records["context_ids"], records["gold_rank"], records["prompt_hash"], records["prediction"], strict=True
    )
    return dict(zip(keys, values, strict=True))


def _keys(bucket: str, prefix: str) -> list[str]:
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_evaluation_on_s3_equals_single_process(ray_local, s3_bucket, tiny_data, minilm_reranker, caplog):
    """Every retriever, two routers, and the generating paths (gold context, retrieved context, HyDE, crag's grades and
    its corrective retrieval, the LLM router) through ray_jobs.evaluate, with data, indexes, records and the report on
    S3, against the single-process runner. What it tests is where each stage runs and what it stores, not a model's
    answers, so the scripted OpenAI-compatible server answers (tests/scripted_server.py: it grades some rows'
    excerpts all irrelevant, so crag's corrective retrieval runs; SmolLM2 answers on Ray in this module's other
    tests), and the dense retrievers embed with the hashing embedder (`HASHING`)."""
    data_uri = upload_dir(Path(tiny_data), s3_bucket, "t2ragbench")
    methods = ["oracle", "bm25", "base", "hybrid_bm25", "hybrid_rrf", "reranker", "hyde", "crag", "bm25@semantic",
               "bm25@llm"]  # fmt: skip
    fields = {
        "methods": methods,
        "retrieval_only_methods": ["base", "hybrid_bm25", "hybrid_rrf", "reranker", "bm25@semantic"],
        "prompts": {"max_context_chars": 500},
        "limit": 2,
        "retrieval": {
            "index_uri": f"s3://{s3_bucket}/lancedb",
            "reranker": {**minilm_reranker, "max_length": 128},
            **HASHING,
        },
    }
    caplog.set_level(logging.INFO)
    ray_out, local_out = f"s3://{s3_bucket}/runs/ray", f"s3://{s3_bucket}/runs/local"
    with scripted_for(tiny_data) as generator:
        fields["generator"] = generator
        distributed = run_ray(_config(data_uri, ray_out, runner="ray", **fields))
        local = run_local(_config(data_uri, local_out, **fields))
    assert distributed["methods"] == local["methods"]  # the same JSON result, number for number
    ray_rows = _records(ray_out)
    assert ray_rows == _records(local_out)  # identical rankings, prompts and predictions per question
    # Retrieval for every question (the semantic router's too); oracle, HyDE, crag and the LLM router for the sample.
    assert len(ray_rows) == 6 * 33 + 4 * 4
    graded = read_records(local_out).filter(pc.equal(pc.field("method"), "crag")).column("relevant").to_pylist()
    assert 0 in graded and any(n > 0 for n in graded)  # some rows ranked again by the fallback, some not

    scorecards = local["methods"]
    assert scorecards["oracle"]["weighted"]["generated"] == 4  # two sampled questions per subset
    assert "mrr@3" not in scorecards["oracle"]["weighted"]
    assert scorecards["bm25"]["weighted"]["retrieved"] == 33 and scorecards["bm25"]["weighted"]["generated"] == 4
    assert "number_match" not in scorecards["base"]["weighted"]  # retrieval-only in this run
    assert scorecards["hyde"]["weighted"]["retrieved"] == 4  # HyDE retrieves for the sample only

    record_keys = [k for k in _keys(s3_bucket, "runs/ray/records/") if not k.endswith("/")]  # skip folder markers
    assert record_keys and all(k.endswith(".parquet") for k in record_keys)
    assert {"runs/ray/result.json", "runs/ray/manifest.json"} <= set(_keys(s3_bucket, "runs/ray/"))
    assert any(k.endswith(".lance") or ".lance/" in k for k in _keys(s3_bucket, "lancedb/"))
    stored = json.loads(boto3.client("s3").get_object(Bucket=s3_bucket, Key="runs/ray/result.json")["Body"].read())
    assert stored["methods"]["bm25"]["weighted"]["questions"] == 33

    written = write_report(ray_out)
    assert written["table3"] == f"{ray_out}/report/table3.md"
    assert {"runs/ray/report/number_match.png", "runs/ray/report/retrieval_curves.png"} <= set(
        _keys(s3_bucket, "runs/ray/report/")
    )
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in caplog.text  # credentials never reach the logs


def _kill_replica_once(services: list, records_dir: Path, done: threading.Event, killed: list) -> None:
    """Kill this run's generator replica (as a crash: Ray restarts it) while it holds a batch. (Not on the first
    records: on a loaded host they could appear only as the run ended.)"""
    import ray

    deadline = time.time() + 240
    while time.time() < deadline and not done.is_set():
        replica = replica_holding_a_batch(services)
        if replica is not None:
            written = sum(pq.ParquetFile(f).metadata.num_rows for f in records_dir.glob("*.parquet"))
            ray.kill(replica, no_restart=False)
            killed.append(written)  # records written when the kill came
            return
        time.sleep(0.2)


def test_a_killed_generator_replica_loses_nothing_and_duplicates_nothing(
    ray_local, tiny_data, tmp_path, recorded_services
):
    """The replica is killed mid-run: Ray restarts it, the batch in flight is sent again, and the one run finishes
    with every record once, without a rerun."""
    out = tmp_path / "resume"
    config = _config(
        tiny_data,
        out,
        runner="ray",
        methods=["oracle"],
        limit=6,
        generator={"preset": "smollm2-135m", "n_ctx": 4096, "sampling": {"max_tokens": 24, "seed": 7}, "batch_size": 3},
        # Blocks of 3 rows from prompt building on, so records are written (and resumable) 3 at a time.
        ray={"block_rows": 3, "retrieve_batch_size": 3},
    )
    services = recorded_services
    done, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_replica_once, args=(services, out / "records", done, killed))
    killer.start()
    try:
        result = run_ray(config)
    finally:
        done.set()
        killer.join()
    assert killed, "the generator replica was never killed mid-run"
    assert killed[0] < 12  # generation was still going on: most records came after the kill
    records = read_records(str(out))
    ids = records.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 12  # the seeded sample of both subsets, complete and without duplicates
    assert pc.all(pc.is_valid(records.column("raw_output"))).as_py()
    assert result["attempts"]["still_failed"] == 0
    assert result["model_loads"]["smollm2-135m"] == 2  # the first start and the restart
    # A rerun of the finished job computes nothing, loads nothing and reports the same numbers.
    again = run_ray(config)
    assert read_records(str(out)).num_rows == 12
    assert again["methods"]["oracle"]["weighted"]["generated"] == 12 and again["model_loads"] == {}


def test_a_run_started_on_one_engine_finishes_on_the_other(ray_local, tiny_data, tmp_path, monkeypatch):
    """Stopped after two record blocks on the single-process runner, finished on Ray: one record per
    (method, id) and the numbers of an uninterrupted run. (Answered by the scripted server: what is tested is
    which records each engine keeps and writes.)"""
    with scripted_for(tiny_data) as generator:
        fields = {
            "methods": ["oracle", "bm25", "base"],
            "retrieval_only_methods": ["base"],
            "generator": generator,
            "limit": 2,
            "retrieval": HASHING,
        }
        whole = run_local(_config(tiny_data, tmp_path / "whole", **fields))

        out = tmp_path / "switched"
        written = []
        write = local.write_records

        def write_then_stop(*args, **kwargs):
            if len(written) == 2:
                raise KeyboardInterrupt  # as if the user pressed Ctrl-C here
            written.append(write(*args, **kwargs))

        monkeypatch.setattr(local, "write_records", write_then_stop)
        with pytest.raises(KeyboardInterrupt):
            run_local(_config(tiny_data, out, **fields))
        monkeypatch.undo()
        partial = read_records(str(out))
        assert 0 < partial.num_rows < read_records(str(tmp_path / "whole")).num_rows

        finished = run_ray(_config(tiny_data, out, runner="ray", **fields))
        records = read_records(str(out))
        keys = list(zip(records.column("method").to_pylist(), records.column("id").to_pylist(), strict=True))
        assert len(keys) == len(set(keys)) == read_records(str(tmp_path / "whole")).num_rows
        assert finished["methods"] == whole["methods"]
        assert {str(p) for p in written} <= {str(p) for p in (out / "records").iterdir()}  # kept, not recomputed
        # Back on the single-process runner: nothing left to do, the same numbers.
        assert run_local(_config(tiny_data, out, **fields))["methods"] == whole["methods"]
        assert read_records(str(out)).num_rows == len(keys)


def test_a_sharded_corpus_ranks_as_the_whole_one(ray_local, mini_data, tmp_path):
    """Each corpus in three shards, each held by its own retrieval actors that merge into the shards before: the
    records equal an unsharded single-process run's."""
    fields = {"methods": ["bm25", "base"], "retrieval_only": True}
    sharded = _config(mini_data, tmp_path / "ray", runner="ray", retrieval={"shards": 3, **HASHING}, **fields)
    distributed = run_ray(sharded)
    whole = run_local(_config(mini_data, tmp_path / "local", retrieval=HASHING, **fields))
    assert distributed["methods"] == whole["methods"]
    assert _records(str(tmp_path / "ray")) == _records(str(tmp_path / "local"))
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    rows = {line["stage"]: line["rows"] for line in manifest["ray_stages"]}
    assert rows["retrieve"] == 3 * read_records(str(tmp_path / "ray")).num_rows  # every row went through 3 shards


def test_cpu_actors_tokenize_for_gpu_embedding_actors(ray_local, tiny_data, tmp_path):
    """Embedding actors that hold a (declared) GPU get their token ids from CPU actors in front of them, for the
    corpus, its chunks (hybrid_meta's chunked dense) and the questions; each engine builds its own tables, and the
    rankings are the single process's."""
    gpu = {"retrieve_block_rows": 8, "embed_gpus": 1, "embed_cpus": 1}

    def config(runner: str, **extra):
        index = {"index_uri": str(tmp_path / runner / "lancedb")}
        return _config(
            tiny_data,
            tmp_path / runner,
            runner=runner,
            methods=["base", "hybrid_meta"],
            retrieval_only=True,
            retrieval=index,
            **extra,
        )

    distributed = run_ray(config("ray", ray=gpu))
    whole = run_local(config("local"))
    assert distributed["methods"] == whole["methods"]
    assert _records(str(tmp_path / "ray")) == _records(str(tmp_path / "local"))
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    built = [entry for entry in manifest["indexes"] if not entry["reused"]]
    contexts = sum(e["rows"] for e in built if "chunks" not in e["corpus"])
    chunks = sum(e["rows"] for e in built if "chunks" in e["corpus"])
    assert chunks > contexts > 0  # every context's table and its chunks' table, built by the Ray pools
    rows = {line["stage"]: line["rows"] for line in manifest["ray_stages"]}
    assert rows["tokenize_passages"] == rows["embed_passages"] == contexts + chunks  # tokenized on CPU actors
    questions = whole["methods"]["base"]["weighted"]["questions"]
    assert rows["tokenize_queries"] == rows["embed_queries"] == 2 * questions


class FakeService:
    """Stands for the run's generator service where nothing runs: two replica handles to hand to the clients."""

    replicas = ("replica-1", "replica-2")


def test_answered_groups_share_one_generator(ray_local, tiny_data, short_system_prompt, tmp_path, monkeypatch):
    """Methods reach their answers by different chains; every generation goes to the run's one generator service
    (HyDE's documents and the answering tail alike), and every other stage is placed once per kind of row
    (retrieval only, answered)."""
    config = _config(
        tiny_data,
        tmp_path / "out",
        short_system_prompt,
        runner="ray",
        methods=["pretrained_only", "oracle", "bm25", "base", "hyde"],
        generator={"preset": "smollm2-135m", "n_ctx": 4096},
        limit=2,
        ray={"block_rows": 2, "retrieve_block_rows": 16},
    )
    # A one-node cluster declaring more logical CPUs than the cores: input tasks bounded by the cores.
    assert input_tasks() == os.cpu_count() < ray_local.cluster_resources()["CPU"]
    work = work_left(config, Resources(config).questions)
    assert sum(g.stages[-2:] == evaluate.ANSWER_TAIL for g in work) == 4  # pretrained_only and oracle share a chain
    placed: list[tuple[str, ...]] = []
    together: list[list[tuple[str, ...]]] = []
    place, place_together = evaluate.place, evaluate.place_together
    monkeypatch.setattr(
        evaluate, "place", lambda ds, stages, cfg, service: placed.append(stages) or place(ds, stages, cfg, service)
    )

    def record_together(parts, cfg, service):
        together.append([stages for _, stages in parts])
        return place_together(parts, cfg, service)

    monkeypatch.setattr(evaluate, "place_together", record_together)
    blocks: list[tuple[int, int]] = []
    from_table = evaluate.dataset_from_table

    def record_blocks(table, block_rows):
        blocks.append((table.num_rows, block_rows))
        return from_table(table, block_rows)

    monkeypatch.setattr(evaluate, "dataset_from_table", record_blocks)
    evaluate.placed_work(config, work, FakeService())  # lazy: places the stages, runs nothing
    # Rows that generate come in small blocks (the unit of resume), rows that only retrieve in large ones.
    assert [rows for rows, _ in blocks] == [g.rows.num_rows for g in work]
    sizes = {g.stages: size for g, (_, size) in zip(work, blocks, strict=True)}
    assert sizes[("retrieve",)] == sizes[("embed_queries", "retrieve")] == 16  # bm25 and base, unsampled questions
    answered = [size for stages, size in sizes.items() if stages[-2:] == evaluate.ANSWER_TAIL]
    assert len(answered) == 4 and set(answered) == {2}
    assert [stages for stages in placed if stages] == [("hyde_prompts", "generate"), evaluate.ANSWER_TAIL]
    retrieval_only, answered = together
    assert merged_chain(retrieval_only) == ("embed_queries", "retrieve")  # bm25 and base rows share the retriever
    assert merged_chain(answered) == ("hyde_query", "embed_queries", "retrieve", "read_contexts", "answer_prompts")


WORKER_NOISE = """
import os
import sys
import threading

if sys.argv and sys.argv[0].endswith("default_worker.py"):  # a Ray worker: print once its output is redirected
    timer = threading.Timer(3.0, lambda: print("noise printed by a Ray worker", flush=True))
    timer.daemon = True
    timer.start()
elif "t2rag.cli" in sys.orig_argv:  # the CLI: a process it starts writes to descriptor 1
    timer = threading.Timer(3.0, lambda: os.system("echo noise printed by a child process"))
    timer.daemon = True
    timer.start()
"""


def test_json_output_is_only_json_on_the_ray_engine(tiny_data, tmp_path):
    """`t2rag eval --runner ray --json` in a fresh process (its own Ray) whose workers print to stdout, as the
    raylet's worker warnings do, and which starts a process that writes to its stdout, as vLLM's engine core does:
    both must reach stderr, not stdout."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(WORKER_NOISE)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    argv = [sys.executable, "-m", "t2rag.cli", "eval", "--runner", "ray", "--data", tiny_data, "--methods", "bm25"]
    argv += ["--retrieval-only", "--out", str(tmp_path / "cli"), "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "noise printed by a Ray worker" in done.stderr  # forwarded, and sent to stderr
    assert "noise printed by a child process" in done.stderr  # descriptor 1 is stderr during the command
    result = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert result["methods"]["bm25"]["weighted"]["questions"] == 33
    assert done.stdout.count("\n") == 1
