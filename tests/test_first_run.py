"""What a newcomer's first run prints: progress with counts, rates and time left, and no library noise."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from t2rag.progress import Progress, format_rate, format_seconds

NOISE = ("WARN", "lance::", "Loading weights", "it/s]", "(0 rows/s)")


@pytest.mark.slow
def test_a_fresh_run_prints_progress_and_no_library_noise(tmp_path, tiny_data):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "LANCEDB_LOG")}
    env["T2RAG_CACHE"] = str(tmp_path / "cache")  # nothing embedded yet: LanceDB creates its tables, as on day one
    config = tmp_path / "first.yaml"
    config.write_text(
        "methods: [oracle, base]\nretrieval_only_methods: [base]\ngenerator: smollm2-135m\nlimit: 1\n"
        f"data: {{source: {tiny_data}, subsets: [FinQA]}}\n"
    )
    command = [sys.executable, "-m", "t2rag.cli", "eval", "--config", str(config), "--out", str(tmp_path / "run")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout + done.stderr
    assert not [n for n in NOISE if n in printed], printed
    lines = done.stderr.splitlines()
    assert any(re.fullmatch(r"INFO t2rag\.progress: \[retrieve: base\] 11/11 rows \(100%\), .* done in .*", ln)
               for ln in lines), lines  # fmt: skip
    assert any(re.search(r"\[generate: oracle\] 1/1 rows \(100%\), [\d.]+ (s/row|rows/s), done in", ln) for ln in lines)
    assert "  FinQA: dev, 11 questions against 4 contexts" in done.stdout
    assert re.search(r"\| oracle +\| +1 +\| +[\d.]+ +\| +\[[\d.]+, [\d.]+\] +\|", done.stdout)  # n, NM, interval


def test_rates_have_sensible_precision():
    assert format_rate(6067, 41.0) == "148 rows/s"
    assert format_rate(8, 0.6) == "13.3 rows/s"
    assert format_rate(3, 1.5) == "2.00 rows/s"
    assert format_rate(8, 245.7) == "30.7 s/row"
    assert format_rate(0, 0.1) == "– rows/s"
    assert [format_seconds(s) for s in (42.4, 185, 3720)] == ["42 s", "3 min 05 s", "1 h 02 min"]


def test_progress_lines_count_rate_and_time_left(caplog, monkeypatch):
    clock = iter([0.0, 10.0, 40.0])
    monkeypatch.setattr("t2rag.progress.time.perf_counter", lambda: next(clock))
    caplog.set_level("INFO", logger="t2rag.progress")
    progress = Progress("generate: oracle", 4, every_s=5.0, bar=False)
    progress.advance(1)  # at 10 s
    progress.advance(3)  # at 40 s
    assert [r.getMessage() for r in caplog.records] == [
        "[generate: oracle] 1/4 rows (25%), 10.0 s/row, 30 s left",
        "[generate: oracle] 4/4 rows (100%), 10.0 s/row, done in 40 s",
    ]


def test_a_terminal_gets_a_bar(capsys):
    progress = Progress("retrieve: bm25", 10, bar=True)
    progress.advance(4)
    progress.advance(6)
    bar = capsys.readouterr().err
    assert "retrieve: bm25" in bar and "10/10" in bar and "row/s" in bar
