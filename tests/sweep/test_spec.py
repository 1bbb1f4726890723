"""A sweep file read into trials, and every refusal one line before any trial starts."""

from __future__ import annotations

import pytest
import yaml

from t2rag.cli import main
from t2rag.errors import ConfigError
from t2rag.sweep.spec import load_sweep, trial_name


def _sweep(tmp_path, **fields):
    base = {"methods": ["bm25"], "retrieval_only": True}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"base": base, "out": str(tmp_path / "out"), **fields}))
    return path


def test_a_grid_is_every_combination_each_an_ordinary_run_config(tmp_path):
    sweep = load_sweep(_sweep(tmp_path, grid={"methods": ["bm25", "base"], "retrieval.k": [1, 5]}))
    assert [t.name for t in sweep.trials] == ["methods=bm25,k=1", "methods=bm25,k=5", "methods=base,k=1",
                                              "methods=base,k=5"]  # fmt: skip
    last = sweep.trials[-1]
    assert last.config.methods == ["base"] and last.config.retrieval.k == 5  # a lone method is a list of one
    assert last.config.out == str(tmp_path / "out" / "trials" / "methods=base,k=5")
    assert last.values == {"methods": "base", "retrieval.k": 5}
    assert len({t.config.fingerprint() for t in sweep.trials}) == 4


def test_names_say_the_values_and_stay_unique_when_long():
    sampled = trial_name({"retrieval.bm25.k1": 1.23456, "retrieval.embedder.model": "org/model"})
    assert sampled.startswith("k1=1.235,model=org-model~")  # rounded: the exact values' hash follows
    assert sampled != trial_name({"retrieval.bm25.k1": 1.23457, "retrieval.embedder.model": "org/model"})
    assert trial_name({"retrieval.hybrid.alpha": 0.5}) == "alpha=0.5"
    assert trial_name({"a.k": 1, "b.k": 2}) == "a.k=1,b.k=2"  # two keys ending alike keep their paths
    long = [trial_name({"methods": ["m" * 80, "n" * 80], "retrieval.k": k}) for k in (1, 2)]
    assert long[0] != long[1] and all(len(n) <= 120 for n in long)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"grid": {"retrieval.kk": [1]}}, "retrieval.kk is not a config key (close: retrieval.k)"),
        ({"grid": {"retrieval.k": [3, 0]}}, "trial k=0: "),
        ({"grid": {"retrieval.k": []}}, "grid: retrieval.k has no values"),
        ({}, "the sweep varies nothing"),
        ({"grid": {"retrieval.k": [3]}, "objective": {"metric": "em"}}, "no trial generates any"),
        ({"grid": {"retrieval.k": [3]}, "objective": {"metric": "mrr3"}}, "(close: mrr@3"),
        ({"grid": {"retrieval.k": [3]}, "objective": {"subset": "FinQa"}}, "(close: FinQA"),
        ({"search": {"trials": 2, "space": {"retrieval.bm25.k1": {"low": 0.5, "high": 2}}}}, "needs data.split"),
        ({"search": {"trials": 2, "space": {"retrieval.k": {"low": 1, "high": 200, "integer": True}}}}, "k=200"),
        ({"search": {"trials": 2, "space": {"retrieval.k": {"low": 3, "high": 1}}}}, "is not below high"),
    ],
)
def test_bad_sweeps_are_refused_in_one_line(tmp_path, capsys, fields, message):
    path = _sweep(tmp_path, **fields)
    with pytest.raises(ConfigError, match=None) as caught:
        load_sweep(path)
    assert message in str(caught.value)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("t2rag: error: ") and message in err
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_search_on_a_test_split_is_refused(tmp_path):
    space = {"retrieval.bm25.k1": {"low": 0.5, "high": 2.0}}
    path = _sweep(tmp_path, search={"trials": 2, "space": space})
    raw = yaml.safe_load(path.read_text())
    raw["base"]["data"] = {"split": "test"}
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match="search on a dev split"):
        load_sweep(path)
    raw["base"]["data"] = {"split": "dev"}
    path.write_text(yaml.safe_dump(raw))
    assert load_sweep(path).trials == []  # a search's trials come as it samples them


def test_too_many_trials_and_an_unreachable_tracker_are_refused_before_any_trial(tmp_path, capsys):
    big = _sweep(tmp_path, grid={"retrieval.k": [1, 2, 3]}, max_trials=2)
    assert main(["sweep", str(big)]) == 2
    assert "3 trials, more than max_trials 2: pass --yes" in capsys.readouterr().err
    tracked = _sweep(tmp_path, grid={"retrieval.k": [1]}, tracking={"mlflow": {"uri": "http://127.0.0.1:9"}})
    assert main(["sweep", str(tracked)]) == 2
    assert "the MLflow server at http://127.0.0.1:9 cannot be reached" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
