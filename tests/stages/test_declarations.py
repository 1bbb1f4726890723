"""The stages' declarations (columns read, added with their types, dropped; pool kind) are what the stages really do,
and the docs, the records schema and Ray's pool kinds agree with them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from t2rag.config import load_config
from t2rag.pipeline.local import LocalRunner
from t2rag.run_folder import records
from t2rag.run_folder.records import RECORD_SCHEMA
from t2rag.stages import STAGES, Stage, built
from t2rag.stages.base import CORPUS_COLUMNS
from t2rag.stages.route import ROUTE_TYPES
from t2rag.stages.work import INPUT_SCHEMA
from tests.scripted_server import scripted_for

ROOT = Path(__file__).resolve().parents[2]


def declaring(column: str) -> set[str]:
    return {name for name, stage in STAGES.items() if column in stage.adds.names}


#: Where each stage runs on Ray, written out: a stage moved to another pool kind must be a deliberate change here.
POOLS = {
    "hyde_prompts": "light", "generate": "generate", "hyde_query": "light", "tokenize_queries": "tokenize",
    "embed_queries": "embed", "retrieve": "retrieve", "rerank": "rerank", "read_contexts": "light",
    "grade_prompts": "light", "grade_contexts": "light", "corrective_retrieve": "retrieve",
    "answer_prompts": "light", "parse_answers": "light", "tokenize_passages": "tokenize", "embed_passages": "embed",
    "route_prompts": "light", "route": "embed",
}  # fmt: skip


def _named_stage_classes(base: type[Stage]) -> set[str]:
    out = set()
    for cls in base.__subclasses__():
        if "name" in cls.__dict__ and cls.__module__.startswith("t2rag."):  # not a plugin's, from another test
            out.add(cls.name)
        out |= _named_stage_classes(cls)
    return out


def test_every_stage_class_has_its_place_and_its_pool():
    assert _named_stage_classes(Stage) == set(STAGES)
    assert {name: stage.pool for name, stage in STAGES.items()} == POOLS


def test_the_docs_table_is_made_from_the_declarations():
    made = subprocess.run([sys.executable, "-m", "t2rag.stages"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert (ROOT / "docs" / "stages.md").read_text() == made.stdout, "rerun: python -m t2rag.stages > docs/stages.md"


def test_every_record_column_comes_from_the_plan_or_a_stage_that_declares_its_type():
    for fld in RECORD_SCHEMA:
        sources = declaring(fld.name)
        if fld.name in INPUT_SCHEMA.names:
            assert not sources and INPUT_SCHEMA.field(fld.name).type == fld.type, fld.name
            continue
        assert sources, f"no stage declares record column {fld.name}"
        assert {STAGES[s].adds.field(fld.name).type for s in sources} == {fld.type}, fld.name


def test_the_records_docs_name_the_declaring_stages_and_types():
    rows = re.findall(r"^\| ([a-z0-9_, ]+) \| ([^|]+) \| ([a-z_, ]+) \| [^|]+ \|$", records.__doc__, re.M)
    documented = set()
    for names, dtype, stages in rows[1:]:  # the header row first
        for name in names.split(", "):
            documented.add(name)
            assert str(RECORD_SCHEMA.field(name).type).replace("item: ", "").replace("double", "float64") == dtype
            expected = {"plan"} if name in INPUT_SCHEMA.names else declaring(name)
            assert set(stages.split(", ")) == expected, name
    assert documented == set(RECORD_SCHEMA.names)


#: Declared columns a stage adds only on some batches: retrieval's shard columns pass between the shards of a
#: sharded corpus (the last shard turns them into the ranking).
SOMETIMES = {"retrieve": {"shard_positions", "shard_scores"}}


def needed_here(name: str, batch: pa.Table) -> set[str]:
    """Optional columns a stage cannot do without on these rows: the one naming a row's corpus (the rows carry
    `subset`, a served request `corpus`), dense retrieval's query vector, and what reading retrieved or gold contexts
    reads (only reading nothing needs none)."""
    if name == "retrieve":
        return {*CORPUS_COLUMNS, "query_vector"}
    if name == "read_contexts" and set(batch.column("method").to_pylist()) != {"pretrained_only"}:
        return {*CORPUS_COLUMNS, "context_ids", "gold_context"}
    return {*CORPUS_COLUMNS} if name != "read_contexts" else set()


def checked_chain(resources, names: tuple[str, ...], batch: pa.Table) -> pa.Table:
    """Each stage on the batch, checked against its declaration: what it needs is there, it adds exactly what it
    declares (with the declared types), what it drops is gone, and it runs as well without its optional columns."""
    for name, stage in built(resources, names):
        assert set(stage.reads) <= set(batch.column_names), (name, stage.reads, batch.column_names)
        optional = (set(stage.optional) - needed_here(name, batch)) & set(batch.column_names)
        if optional:
            bare = stage(batch.drop_columns(sorted(optional)))
            always = set(stage.adds.names) - SOMETIMES.get(name, set())
            assert always <= set(bare.column_names), (name, "without", optional)
        before = set(batch.column_names)
        batch = stage(batch)
        added = set(batch.column_names) - before
        assert set(stage.adds.names) - SOMETIMES.get(name, set()) - before <= added <= set(stage.adds.names), name
        for column in added:
            assert batch.schema.field(column).type == stage.adds.field(column).type, (name, column)
        assert not set(stage.drops) & set(batch.column_names), name
    return batch


@pytest.fixture(scope="module")
def scripted(tiny_data):
    with scripted_for(tiny_data) as generator:
        yield generator


def test_each_stage_adds_what_it_declares_on_every_chain(tiny_data, minilm_reranker, scripted, tmp_path):
    """Every chain of the planned work (retrieval only, reranking, HyDE, grading, oracle and pretrained answers) on real
    rows, each stage checked against its declaration. The scripted OpenAI-compatible server generates (what is
    checked is the columns, not a model's text; SmolLM2 runs every method in tests/generation)."""
    config = load_config(
        None,
        {
            "data": {"source": tiny_data},
            "methods": ["pretrained_only", "oracle", "bm25", "reranker", "hyde", "crag", "bm25@semantic", "bm25@llm"],
            "generator": scripted,
            "retrieval": {"reranker": minilm_reranker},
            "prompts": {"max_context_chars": 300, "hyde_max_tokens": 24},
            "limit": 1,
            "out": str(tmp_path / "run"),
        },
    )
    engine = LocalRunner(config)
    chains = set()
    for group in engine.work_left(set()):
        rows = checked_chain(engine.resources, group.stages, group.rows.slice(0, 1))
        if "parse_answers" in group.stages:  # an answered row has every record column its chain can fill
            unfilled = set() if "retrieve" in group.stages else {"context_ids", "scores", "gold_rank"}
            unfilled |= set() if "grade_contexts" in group.stages else {"reader_ids", "relevant"}
            unfilled |= set() if "route" in group.stages else set(ROUTE_TYPES)
            assert set(RECORD_SCHEMA.names) - set(rows.column_names) == unfilled, group.stages
        chains.add(group.stages)
    every = {name for chain in chains for name in chain}
    assert every >= set(STAGES) - {"tokenize_queries", "tokenize_passages", "embed_passages"}
    texts = pa.table({"text": engine.resources.corpus("FinQA").texts[:2]})
    checked_chain(engine.resources, ("tokenize_passages", "embed_passages"), texts)
    checked_chain(engine.resources, ("tokenize_queries", "embed_queries"), group.rows.slice(0, 1))
