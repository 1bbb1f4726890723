"""Plugins in one process, through the `t2rag` command as a user runs it: the example package installed beside
t2rag (entry points), a module beside its config (no install), and each bad input's one line.

Every run is a subprocess: what a plugin registers stays in that process, as it does for a user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
import yaml

from t2rag.run_folder.files import read_records
from tests.conftest import PLUGIN_MODULES as MODULES
from tests.conftest import t2rag, with_example


def write_config(path: Path, **fields) -> Path:
    path.write_text(yaml.safe_dump({"retrieval_only": True, **fields}))
    return path


def ranks(run: Path, method: str) -> dict[str, dict[str, float]]:
    """Each question's ranked context ids, best first, with their scores."""
    records = read_records(str(run), ["id", "method", "context_ids", "scores"])
    part = records.filter(pc.equal(records.column("method"), method)).to_pylist()
    return {r["id"]: dict(zip(r["context_ids"], r["scores"], strict=True)) for r in part}


def test_the_installed_example_is_listed_run_planned_reported_compared_and_exported(example_installed, tmp_path):
    env = with_example(example_installed)
    listed = json.loads(t2rag("methods", "--json", cwd=tmp_path, env=env).stdout)
    mine = {m["name"]: m for m in listed if m["origin"] != "built-in"}
    assert set(mine) == {"char_tfidf", "tfidf_focus", "focus_tfidf_rerank"}
    assert mine["tfidf_focus"] == {"name": "tfidf_focus", "stages": ["retrieve", "read_contexts", "answer_prompts",
                                   "generate", "parse_answers"], "retriever": "tfidf_focus",
                                   "origin": "t2rag-char-tfidf", "version": "0.1.0"}  # fmt: skip
    assert "char_tfidf" not in {m["name"] for m in json.loads(t2rag("methods", "--json", cwd=tmp_path).stdout)}

    run = tmp_path / "run"
    config = write_config(tmp_path / "tfidf.yaml", methods=["bm25", "bm25_focus", "char_tfidf", "tfidf_focus",
                          "focus_tfidf_rerank"], data={"subsets": ["FinQA"]}, out=str(run))  # fmt: skip
    done = t2rag("eval", "--config", str(config), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((run / "result.json").read_text())
    made = {"source": "t2rag-char-tfidf", "version": "0.1.0"}
    assert result["plugins"]["methods"]["tfidf_focus"] == {**made, "reader": "retrieved_context"}
    assert result["plugins"]["retrievers"] == {"char_tfidf": made, "tfidf_focus": made}
    assert result["plugins"]["stages"] == {"tfidf_rerank": made}
    assert json.loads((run / "manifest.json").read_text())["plugins"] == result["plugins"]
    mrr = {m: s["weighted"]["mrr@3"] for m, s in result["methods"].items()}
    assert mrr["char_tfidf"] > mrr["bm25"]  # character n-grams find what whitespace tokens miss

    # tfidf_focus is reciprocal-rank fusion (k 60) of its two members' rankings: a context both rank in their top 10
    # (the records' depth) scores 1 / (61 + position) from each, recomputed here from the members' records.
    tfidf, focus, fused = ranks(run, "char_tfidf"), ranks(run, "bm25_focus"), ranks(run, "tfidf_focus")
    assert len(fused) == 883
    checked = 0
    for qid, got in fused.items():
        a, b = list(tfidf[qid]), list(focus[qid])
        for cid, score in got.items():
            if cid in a and cid in b:
                assert np.isclose(score, 1 / (61 + a.index(cid)) + 1 / (61 + b.index(cid))), (qid, cid)
                checked += 1
        assert list(got.values()) == sorted(got.values(), reverse=True)
    assert checked > 883 * 3

    # focus_tfidf_rerank is bm25_focus's first 10, reordered by the reranking stage; the rest as bm25_focus ranks.
    reranked = ranks(run, "focus_tfidf_rerank")
    assert len(reranked) == 883
    moved = 0
    for qid, got in reranked.items():
        mine, theirs = list(got), list(focus[qid])
        assert sorted(mine[:10]) == sorted(theirs[:10]) and mine[10:] == theirs[10:]
        assert list(got.values())[:10] == sorted(list(got.values())[:10], reverse=True)
        moved += mine[:10] != theirs[:10]
    assert moved > 0

    plan = json.loads(t2rag("plan", "--config", str(config), "--json", cwd=tmp_path, env=env).stdout)
    retrieve = [p for p in plan["pools"] if p["role"] == "retrieve"]
    assert retrieve and retrieve[0]["plugins"] == ["char_tfidf", "tfidf_focus"]
    assert [p["plugins"] for p in plan["pools"] if p["role"] == "rerank"] == [["tfidf_rerank"]]
    timed = [p for p in plan["estimate"]["pools"] if p["role"] == "retrieve"]
    assert timed[0]["seconds"] is None and "no rate is known for plugin code" in timed[0]["note"]
    assert plan["estimate"]["phases_s"]["evaluate"] is None and plan["estimate"]["wall_s"] is None  # not guessed

    # Measured here, the plugins' pools are priced like the built-ins'.
    rates = tmp_path / "rates.yaml"
    measured = t2rag("rates", "measure", "--config", str(config), "--out", str(rates), "--json", cwd=tmp_path, env=env)
    assert measured.returncode == 0, measured.stderr[-2000:]
    assert {"plugin char_tfidf", "plugin tfidf_focus", "plugin tfidf_rerank"} <= set(json.loads(measured.stdout))
    priced = write_config(tmp_path / "priced.yaml", methods=["bm25", "bm25_focus", "char_tfidf", "tfidf_focus",
                          "focus_tfidf_rerank"], data={"subsets": ["FinQA"]}, out=str(run),
                          estimate={"rates": str(rates)})  # fmt: skip
    plan = json.loads(t2rag("plan", "--config", str(priced), "--json", cwd=tmp_path, env=env).stdout)
    seconds = {p["role"]: p["seconds"] for p in plan["estimate"]["pools"]}
    assert seconds["rerank"] > 0 and seconds["retrieve"] > 0 and plan["estimate"]["wall_s"] > 0

    report = t2rag("report", str(run), cwd=tmp_path)  # without the plugin: the run's files say what made it
    assert report.returncode == 0, report.stderr[-2000:]
    assert "- plugin methods: char_tfidf (t2rag-char-tfidf 0.1.0), tfidf_focus (t2rag-char-tfidf 0.1.0), " in (
        run / "report" / "report.md").read_text()  # fmt: skip
    compared = t2rag("compare", f"{run}:tfidf_focus", f"{run}:bm25_focus", "--json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert json.loads(compared.stdout)
    from t2rag.results.explore.index import load_run

    explored = load_run(str(run))  # the explorer's index, in a process that never loaded the plugin
    assert {"char_tfidf", "tfidf_focus"} <= set(explored.methods)
    board = tmp_path / "board.jsonl"
    exported = t2rag("export", str(run), "--method", "tfidf_focus", "--out", str(board), "--json", cwd=tmp_path)
    assert json.loads(exported.stdout)["origin"] == "t2rag-char-tfidf 0.1.0"
    lines = [json.loads(line) for line in board.read_text().splitlines()]
    assert len(lines) == 883 and [line["context_id"] for line in lines[:3]] == [list(fused[r["id"]]) for r in lines[:3]]


def test_the_examples_own_tests_pass_where_it_is_installed(example_installed, tmp_path):
    tests = Path(__file__).resolve().parents[1] / "examples" / "custom_method" / "tests"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)], cwd=tmp_path,
                          env={**os.environ, **with_example(example_installed)}, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "5 passed" in done.stdout


def test_a_module_beside_its_config_runs_with_its_stage_and_settings(tmp_path):
    folder = tmp_path / "experiment"
    folder.mkdir()
    shutil.copy(MODULES / "word_overlap.py", folder)
    run = tmp_path / "run"
    settings = {"word_overlap": {"min_length": 4}}
    config = write_config(folder / "overlap.yaml", plugins=["word_overlap"], settings=settings,
                          methods=["bm25", "overlap"], data={"subsets": ["FinQA"]}, out=str(run))  # fmt: skip
    done = t2rag("eval", "--config", str(config), cwd=tmp_path)  # another folder: the config's finds the module
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((run / "result.json").read_text())
    assert result["plugins"]["stages"] == {"fold_questions": {"source": "word_overlap", "version": "0.2.0"}}
    assert result["methods"]["overlap"]["weighted"]["questions"] == 883
    manifest = json.loads((run / "manifest.json").read_text())
    assert any(s["stage"] == "fold_questions" for s in manifest["stages"])
    assert manifest["config"]["settings"] == {"word_overlap": {"min_length": 4}}

    # Another version of the plugin is another configuration: the run is not resumed with it.
    module = folder / "word_overlap.py"
    module.write_text(module.read_text().replace('__version__ = "0.2.0"', '__version__ = "0.3.0"'))
    again = t2rag("eval", "--config", str(config), cwd=tmp_path)
    assert again.returncode == 2 and "holds results of a different configuration" in again.stderr

    bad = write_config(folder / "bad.yaml", plugins=["word_overlap"], settings={"word_overlap": {"min_length": 0}},
                       methods=["overlap"], out=str(tmp_path / "bad"))  # fmt: skip
    refused = t2rag("eval", "--config", str(bad), cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        "settings.word_overlap.min_length: Input should be greater than or equal to 1"
    )


def test_rank_fusion_in_a_config_fuses_a_plugin_retriever_with_bm25_focus(tmp_path):
    shutil.copy(MODULES / "word_overlap.py", tmp_path)
    run = tmp_path / "run"
    config = write_config(tmp_path / "fused.yaml", plugins=["word_overlap"], methods=["bm25_focus", "overlap_focus"],
                          rank_fusion={"overlap_focus": {"retrievers": ["word_overlap", "bm25_focus"]},
                                       "dense_focus": {"retrievers": ["base", "bm25_focus"]}},
                          data={"subsets": ["FinQA"]}, out=str(run))  # fmt: skip
    done = t2rag("eval", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((run / "result.json").read_text())
    assert result["plugins"]["retrievers"]["overlap_focus"] == {"source": "config", "version": None}
    listed = {
        m["name"]: m for m in json.loads(t2rag("methods", "--json", "--config", str(config), cwd=tmp_path).stdout)
    }
    assert (listed["overlap"]["origin"], listed["overlap"]["version"]) == ("word_overlap", "0.2.0")
    assert listed["overlap"]["stages"][:2] == ["fold_questions", "retrieve"]
    assert (listed["overlap_focus"]["origin"], listed["overlap_focus"]["retriever"]) == ("config", "overlap_focus")
    assert listed["dense_focus"]["stages"][:2] == ["embed_queries", "retrieve"]  # a member reads query vectors
    assert result["plugins"]["retrievers"]["word_overlap"]["source"] == "word_overlap"
    assert result["methods"]["overlap_focus"]["weighted"]["questions"] == 883


def test_a_dense_plugin_gets_the_question_and_passage_vectors_the_built_ins_get(tmp_path):
    """cosine_bonus, written from docs/plugins.md, registered with `needs_query_vectors=True` alone: its method
    embeds the question, its `index` gets the passages embedded by the run's embedder (the vector table `base`
    searches), so with no bonus it scores every context as `base` does; with a bonus, a context printing a year the
    question names gains exactly that much."""
    shutil.copy(MODULES / "cosine_bonus.py", tmp_path)
    plain, bonus = tmp_path / "plain", tmp_path / "bonus"
    for run, extra in ((plain, 0.0), (bonus, 0.25)):
        config = write_config(tmp_path / f"{run.name}.yaml", plugins=["cosine_bonus"], methods=["base", "cosine_bonus"],
                              settings={"cosine_bonus": {"bonus": extra}}, data={"subsets": ["FinQA"]},
                              retrieval={"embedder": {"model": "hashing"}}, out=str(run))  # fmt: skip
        done = t2rag("eval", "--config", str(config), cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
    base, mine = ranks(plain, "base"), ranks(plain, "cosine_bonus")
    assert len(mine) == 883
    for qid, got in mine.items():
        for cid, score in got.items():
            if cid in base[qid]:
                assert score == pytest.approx(base[qid][cid], abs=1e-5), (qid, cid)
        assert sum(cid in base[qid] for cid in got) >= 9  # the same ten, but for a near tie at the cut
    raised = ranks(bonus, "cosine_bonus")
    gained = sum(any(score == pytest.approx(base[qid].get(cid, -9) + 0.25, abs=1e-5) for cid, score in got.items())
                 for qid, got in raised.items())  # fmt: skip
    assert gained > 100


def _refused(tmp_path: Path, *modules: str, **fields) -> str:
    """The one line `t2rag eval` prints for a config of these plugins, having written nothing."""
    for module in {"word_overlap", *modules}:
        shutil.copy(MODULES / f"{module}.py", tmp_path)
    out = tmp_path / "run"
    config = write_config(tmp_path / "bad.yaml", plugins=list(modules), data={"subsets": ["FinQA"]}, out=str(out),
                          **fields)  # fmt: skip
    done = t2rag("eval", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert not out.exists() or not any(out.rglob("*.parquet"))
    errors = [line for line in done.stderr.splitlines() if line.startswith("t2rag: error: ")]
    assert len(errors) == 1 and done.stderr.strip().endswith(errors[0]), done.stderr  # progress lines come before it
    return errors[0]


@pytest.mark.parametrize(
    ("modules", "fields", "line"),
    [
        (["broken"], {"methods": ["bm25"]},
         "plugin broken: cannot import it (ModuleNotFoundError: No module named 't2rag_no_such_dependency')"),
        (["word_overlap"], {"methods": ["overlpa"]}, "unknown method 'overlpa' (no plugin registers it; did you mean "
         "overlap?)"),
        (["clashing"], {"methods": ["bm25"]},
         "plugin clashing: retriever 'bm25' clashes with the retriever of that name built into t2rag"),
        (["word_overlap", "overlap_again"], {"methods": ["overlap"]},
         "plugin overlap_again: retriever 'word_overlap' clashes with the retriever of that name from word_overlap "
         "0.2.0"),
        (["poolless"], {"methods": ["bm25"]},
         "plugin poolless: stage 'poolless' declares no pool (set `pool` to one of embed, rerank, tokenize, "
         "retrieve, generate, light)"),
        (["faulty"], {"methods": ["faulty"], "settings": {"faulty": {"fault": "shape"}}},
         "plugin faulty: retriever 'faulty' returned indices of shape (4, 9) and scores of shape (4, 9) for 4 "
         "queries at depth 10 (want (4, 10) each)"),
        (["faulty"], {"methods": ["faulty"], "settings": {"faulty": {"fault": "range"}}},
         "plugin faulty: retriever 'faulty' returned position 69, outside the corpus of 64 contexts (-1 pads a "
         "short row)"),
        (["faulty"], {"methods": ["faulty"], "settings": {"faulty": {"fault": "nan"}}},
         "plugin faulty: retriever 'faulty' returned a NaN score for a ranked context"),
        (["unembedded"], {"methods": ["unembedded"]},
         "plugin unembedded: method 'unembedded' searches with retriever 'unembedded', which reads query vectors, but "
         "its stages do not embed the question (use DENSE: embed_queries, retrieve)"),
        (["bad_rerank"], {"methods": ["bad_scores"], "settings": {"bad_scores": {"fault": "short"}}},
         "plugin bad_rerank: stage 'bad_scores' returned 9 scores for the 10 candidates of question 0"),
        (["bad_rerank"], {"methods": ["bad_scores"], "settings": {"bad_scores": {"fault": "drop"}}},
         "plugin bad_rerank: stage 'bad_scores' returned scores for 3 questions of 4 (a row dropped or added)"),
        (["bad_rerank"], {"methods": ["raw_rerank"], "settings": {"raw_rerank": {"fault": "drop"}}},
         "plugin bad_rerank: stage 'raw_rerank' returned 3 rows for 4 (a reranker keeps every row)"),
        (["bad_rerank"], {"methods": ["raw_rerank"], "settings": {"raw_rerank": {"fault": "outside"}}},
         "plugin bad_rerank: stage 'raw_rerank' returned context 'not-a-candidate' for row 0, which is not among "
         "its candidates"),
    ],
    ids=["import", "unknown-method", "clash-built-in", "clash-plugin", "no-pool", "shape", "range", "nan",
         "dense-unembedded", "rerank-short", "rerank-drop-scores", "rerank-drop-row", "rerank-outside"],
)  # fmt: skip
def test_each_bad_plugin_gets_one_line_and_exit_2_with_nothing_written(tmp_path, modules, fields, line):
    assert _refused(tmp_path, *modules, **fields).endswith(line)


def test_a_block_whose_search_raises_is_retried_and_never_counted(tmp_path):
    shutil.copy(MODULES / "faulty.py", tmp_path)
    flag = tmp_path / "raised"
    run = tmp_path / "run"
    settings = {"faulty": {"fault": "raise_once", "flag": str(flag)}}
    config = write_config(tmp_path / "flaky.yaml", plugins=["faulty"], methods=["bm25", "faulty"], out=str(run),
                          data={"subsets": ["FinQA"]}, settings=settings)  # fmt: skip
    done = t2rag("eval", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((run / "result.json").read_text())
    assert flag.exists() and len(result["attempts"]["faults"]) == 1
    assert "the index server went away once" in result["attempts"]["faults"][0]
    assert result["methods"]["faulty"]["weighted"]["questions"] == 883  # every row once, after the retry

    always = tmp_path / "always"
    config = write_config(tmp_path / "down.yaml", plugins=["faulty"], methods=["bm25", "faulty"], out=str(always),
                          data={"subsets": ["FinQA"]}, settings={"faulty": {"fault": "raise"}},
                          max_attempts=2)  # fmt: skip
    done = t2rag("eval", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2 and "rows left after 2 attempts" in done.stderr
    methods = set(read_records(str(always), ["method"]).column("method").to_pylist())
    assert methods <= {"bm25"}  # the raising method's rows are not results
