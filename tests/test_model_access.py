"""A model that cannot be loaded is one line naming it and how to provide it; Ray's relayed errors keep the kind."""

from __future__ import annotations

import pytest

from t2rag.errors import ConfigError, ModelUnavailable, permanent_error
from t2rag.model_access import loading


def test_a_missing_model_names_itself_and_the_ways_to_provide_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable) as caught, loading("org/model"):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")
    message = str(caught.value)
    assert message.startswith("model 'org/model' cannot be loaded: it is not a local directory")
    assert "HF_HUB_OFFLINE is set" in message and "`hf download org/model`" in message
    assert message.endswith("(OSError: We couldn't connect to 'https://huggingface.co' to load the files)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    with pytest.raises(ModelUnavailable, match="the Hugging Face Hub was not reached"), loading("org/model"):
        raise OSError("offline")


def test_an_incomplete_local_directory_is_named_as_such(tmp_path):
    with (
        pytest.raises(ModelUnavailable, match=r"\(from .*\) cannot be loaded: its directory is incomplete"),
        loading("m", str(tmp_path)),
    ):
        raise OSError("no config.json")


def test_other_errors_pass_through():
    with pytest.raises(RuntimeError), loading("m"):
        raise RuntimeError("CUDA out of memory")


def test_the_permanent_cause_is_found_in_a_chain_and_in_relayed_text():
    try:
        try:
            raise ConfigError("bad field")
        except ConfigError as inner:
            raise RuntimeError("the job failed") from inner
    except RuntimeError as outer:
        assert isinstance(permanent_error(outer), ConfigError)
    relayed = RuntimeError(
        "The actor died because of an error raised in its creation task, ray::MapWorker.__init__()\n"
        "  File ...\nt2rag.errors.ModelUnavailable: model 'x' cannot be loaded: it is not a local directory\n"
    )
    found = permanent_error(relayed)
    assert (
        isinstance(found, ModelUnavailable) and str(found) == "model 'x' cannot be loaded: it is not a local directory"
    )
    assert permanent_error(RuntimeError("ray.exceptions.ActorDiedError: node lost")) is None
    assert permanent_error(RuntimeError("builtins.ValueError: t2rag.errors.Nope: x")) is None
