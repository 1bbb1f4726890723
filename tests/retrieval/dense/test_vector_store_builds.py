"""Processes that share a local index (two runs on one machine, parallel test workers) embed a corpus once: the
first builds its table while the others wait, then reuse it."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np

from t2rag.data.corpus import Corpus
from t2rag.retrieval.dense.vector_store import VectorStore

CORPUS = Corpus("shared", ("a", "b", "c"), ("s",) * 3, ("one page", "another page", "a third page"))


def _build(uri: str, calls: str) -> int:
    """One process's `get_or_build`; its embedding leaves a line in `calls` and takes long enough to overlap."""

    def embed(texts: list[str]) -> np.ndarray:
        with open(calls, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(1.0)
        return np.eye(len(texts), 4, dtype=np.float32)

    return VectorStore(uri).get_or_build("shared-table", CORPUS, embed).rows


def test_two_processes_building_one_table_embed_it_once(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        rows = pool.starmap(_build, [(str(tmp_path / "index"), str(calls))] * 2)
    assert rows == [3, 3]
    assert len(calls.read_text().splitlines()) == 1
