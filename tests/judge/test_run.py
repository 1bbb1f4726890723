"""`t2rag judge` end to end: against an OpenAI-compatible server (the tests' scripted one) on a real run's answers,
with a packaged model on a small run, resumed, and refused in one line before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest
import yaml

from t2rag.cli import main
from t2rag.judge.ratings import number_match_preference
from t2rag.judge.run import read_verdicts
from t2rag.run_folder.files import RATINGS_FILE, read_records
from tests.scripted_server import questions_of, scripted_generator, scripted_server


def _judge(capsys, *argv: str) -> dict:
    assert main(["judge", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_judge_server_rates_a_method_against_the_baseline_and_resumes(scripted_run, sample, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(scripted_run, run)
    with scripted_server(questions_of(sample.table)) as url:
        config = tmp_path / "judge.yaml"
        config.write_text(yaml.safe_dump({
            "methods": ["oracle", "bm25"],
            "judge": {"baseline": "oracle", "methods": ["bm25"], "judge": scripted_generator(url), "rounds": 200},
        }))  # fmt: skip
        result = _judge(capsys, str(run), "--config", str(config))
        verdicts = read_verdicts(str(run))
        again = _judge(capsys, str(run), "--config", str(config))  # resumed: nothing asked, the same ratings
    records = read_records(str(run)).filter(pc.is_valid(read_records(str(run)).column("number_match")))
    answered = {(r["method"], r["subset"], r["id"]): r["number_match"] for r in records.to_pylist()}
    pairs = [k for k in answered if k[0] == "bm25" and ("oracle", k[1], k[2]) in answered]
    assert pairs and verdicts.num_rows == 2 * len(pairs) == result["asked"]  # both orders of every pair
    assert again == result and read_verdicts(str(run)).num_rows == verdicts.num_rows
    rows = verdicts.to_pylist()
    unparsed = [r for r in rows if r["winner"] is None]
    assert unparsed and all(r["choice"] is None for r in unparsed)  # a reply naming neither is no win
    bm25 = result["methods"]["bm25"]
    assert bm25["unparsed"] == len(unparsed) and bm25["games"] == len(rows) - len(unparsed)
    assert bm25["wins"] == sum(r["winner"] == "method" for r in rows)
    parsed = [r for r in rows if r["winner"] is not None]
    for r in parsed:  # each verdict names the side its position stood for in the order asked
        assert r["nm_method"] == answered[("bm25", r["subset"], r["id"])]
    agree = sum(r["winner"] == number_match_preference(r["nm_method"], r["nm_baseline"]) for r in parsed)
    assert bm25["number_match_agreement"]["agree"] == round(100 * agree / len(parsed), 2)
    assert 0 < bm25["number_match_agreement"]["kappa"] < 1  # the scripted judge mostly follows the values
    decided = [r for r in parsed if r["winner"] != "tie"]  # the scripted judge names answer 1 one time in eight
    assert bm25["first_position_share"] == round(100 * sum(r["choice"] == "1" for r in decided) / len(decided), 2)
    assert set(bm25["subsets"]) == {"FinQA", "TAT-DQA"}
    assert json.loads((run / RATINGS_FILE).read_text()) == result
    from t2rag.results.report import write_report

    table = Path(write_report(str(run))["judge"]).read_text()
    assert "oracle (baseline)" in table
    assert f"{bm25['rating']:.2f}" in table


@pytest.mark.slow
@pytest.mark.llm
def test_a_packaged_model_judges_a_small_run(tiny_data, smollm2_path, tmp_path, capsys):
    from t2rag.config import load_config
    from t2rag.pipeline.local import run_local
    from tests.scripted_server import scripted_for

    with scripted_for(tiny_data) as generator:
        run_local(load_config(None, {"data": {"source": tiny_data}, "methods": ["oracle", "pretrained_only"],
                                     "generator": generator, "limit": 1, "out": str(tmp_path / "run")}))  # fmt: skip
    result = _judge(capsys, str(tmp_path / "run"), "--baseline", "oracle", "--judge", "smollm2-135m")
    rated = result["methods"]["pretrained_only"]
    assert result["asked"] == 4 and rated["verdicts"] == 4  # one question per subset, both orders
    assert rated["games"] + rated["unparsed"] == 4
    verdicts = read_verdicts(str(tmp_path / "run")).to_pylist()
    assert all(v["raw_output"] and v["judge"] == "smollm2-135m" for v in verdicts)
    assert all(v["choice"] in ("1", "2", "tie") for v in verdicts)  # constrained to the verdict's schema


def test_refusals_are_one_line_before_any_work(scripted_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(scripted_run, run)
    cases = [
        (["--baseline", "oracle", "--judge", "no-such-judge"], "unknown generator 'no-such-judge'"),
        (["--baseline", "no_such_method", "--judge", "openai"], "the baseline 'no_such_method' has no answers"),
        (["--judge", "openai"], "say which method is the baseline"),
    ]
    for argv, said in cases:
        assert main(["judge", str(run), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1, err
    assert not (run / "judge" / "verdicts").exists()


def test_a_judge_whose_model_is_missing_is_refused_before_asking(scripted_run, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(scripted_run, run)
    config = tmp_path / "judge.yaml"
    absent = {"engine": "llamacpp", "name": "absent", "model": str(tmp_path / "none.gguf")}
    config.write_text(yaml.safe_dump({"methods": ["oracle", "bm25"], "judge": {"baseline": "oracle", "judge": absent}}))
    assert main(["judge", str(run), "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert "judge 'absent'" in err and "cannot be loaded" in err and len(err.splitlines()) == 1, err
    assert not (run / "judge" / "verdicts").exists()


def test_the_plan_counts_the_judges_pairs_prompts_and_tokens():
    """A `judge:` block in the plan: every pair both methods answer (the generation sample), asked in both orders,
    each prompt at least the judge template with its question in it, and seconds at the judge's rate (unknown for
    a judge no rate names)."""
    from ray_jobs.preflight import local_target, make_plan, render
    from t2rag.config import load_config
    from t2rag.estimate.rates import load_rates
    from t2rag.prompts import Prompts

    overrides = {"methods": ["oracle", "bm25", "bm25_meta"], "generator": "qwen2.5-0.5b", "limit": 3,
                 "retrieval_only_methods": ["bm25_meta"],
                 "judge": {"baseline": "oracle", "judge": "smollm2-135m"}}  # fmt: skip
    config = load_config(None, overrides)
    plan = make_plan(config, local_target(config))
    judge = plan.judge
    assert judge.pairs == {"bm25": 6}  # 3 sampled questions x 2 subsets; bm25_meta answers nothing
    assert judge.prompts == 12 and judge.output_tokens == 12 * config.prompts.judge_max_tokens
    template = len(Prompts().templates["judge"])
    rate = load_rates().generators["smollm2-135m"]
    assert judge.prompt_tokens > 12 * template / rate.chars_per_token
    assert judge.seconds is not None and judge.seconds > rate.load_s
    assert "Judge (t2rag judge, after the run): smollm2-135m" in render(plan)
    unknown = make_plan(load_config(None, {**overrides, "judge": {"baseline": "oracle", "judge": "openai"}}),
                        local_target(config)).judge  # fmt: skip
    assert unknown.seconds is None and "no rate for default" in unknown.note
