"""Chunking: table rows stay whole, a table's header opens every chunk inside it, chunks overlap, budgets hold."""

from __future__ import annotations

import numpy as np

from t2rag.data import build_corpora, load_questions
from t2rag.retrieval.dense.chunking import chunk_texts, whitespace_counts

TABLE = "\n".join(
    ["Revenue by segment was as follows:", "| | 2019 | 2018 |", "|---:|---:|---:|"]
    + [f"| segment {i} | {i}.5 | {i}.25 |" for i in range(12)]
    + ["Totals were audited."]
)


def test_table_rows_whole_and_headers_repeated() -> None:
    chunks = chunk_texts([TABLE], max_tokens=20, overlap_tokens=0)
    assert len(chunks.texts) > 2 and chunks.doc.tolist() == [0] * len(chunks.texts)
    rows = {line for line in TABLE.split("\n") if line.startswith("| segment")}
    for text in chunks.texts:
        lines = text.split("\n")
        assert all(line in TABLE.split("\n") for line in lines)  # no line was cut
        assert sum(whitespace_counts(lines)) <= 20
        if any(line in rows for line in lines):  # a chunk with table rows names the columns first
            first_row = next(i for i, line in enumerate(lines) if line in rows)
            assert lines[first_row - 2 : first_row] == ["| | 2019 | 2018 |", "|---:|---:|---:|"]
    covered = {line for text in chunks.texts for line in text.split("\n")}
    assert set(TABLE.split("\n")) <= covered


def test_overlap_repeats_trailing_lines() -> None:
    text = "\n".join(f"line {i} has five words" for i in range(10))  # 5 tokens per line
    chunks = chunk_texts([text], max_tokens=15, overlap_tokens=5, table_header=False)
    for a, b in zip(chunks.texts, chunks.texts[1:], strict=False):
        assert a.split("\n")[-1] == b.split("\n")[0]
    assert chunks.texts[-1].endswith("line 9 has five words")


def test_long_line_cut_at_words_and_every_text_gets_a_chunk() -> None:
    long = " ".join(f"w{i}" for i in range(50))
    chunks = chunk_texts([long, ""], max_tokens=16, overlap_tokens=0)
    assert chunks.doc.tolist().count(1) == 1
    pieces = [t for t, d in zip(chunks.texts, chunks.doc, strict=True) if d == 0]
    assert " ".join(pieces) == long
    assert max(len(p.split()) for p in pieces) <= 16


def test_real_contexts_fit_the_budget() -> None:
    corpus = build_corpora(load_questions(None))["TAT-DQA"]
    chunks = chunk_texts(corpus.texts, max_tokens=128, overlap_tokens=16)
    assert set(np.unique(chunks.doc)) == set(range(len(corpus)))
    oversized = [t for t in chunks.texts if sum(whitespace_counts(t.split("\n"))) > 128]
    assert not oversized
