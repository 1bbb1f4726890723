"""Prompt templates: rendering, overrides, and the worked examples being internally consistent."""

from __future__ import annotations

import json
import re

import pytest

from t2rag.answer import evaluate_formula, extract_answer
from t2rag.errors import ConfigError
from t2rag.prompts import ANSWER_SCHEMA, PromptConfig, Prompts


def test_answer_prompt_holds_question_and_every_context():
    prompts = Prompts()
    messages = prompts.answer("What was revenue in {2019}?", ["Table A {x}", "| a | b |\n|---|---|\n| 1 | 2 |"])
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "What was revenue in {2019}?" in user  # braces survive: no str.format on user text
    assert "### Excerpt 1\nTable A {x}" in user and "### Excerpt 2\n| a | b |" in user
    assert "JSON" in messages[0]["content"]


def test_pretrained_only_prompt_has_no_excerpts():
    user = Prompts().answer("What was revenue?", [])[1]["content"]
    assert "Excerpt" not in user and "What was revenue?" in user


def test_long_contexts_are_clipped():
    prompts = Prompts(PromptConfig(max_context_chars=300))
    user = prompts.answer("q", ["x" * 1000])[1]["content"]
    assert "x" * 300 in user and "x" * 301 not in user and "shortened" in user


def test_templates_can_be_replaced_and_missing_files_are_clear(tmp_path):
    custom = tmp_path / "user.md"
    custom.write_text("Q={question}\nC={contexts}")
    prompts = Prompts(PromptConfig(answer_user=str(custom)))
    assert prompts.answer("why", ["ctx"])[1]["content"].startswith("Q=why\nC=### Excerpt 1\nctx")
    with pytest.raises(ConfigError, match="cannot read"):
        Prompts(PromptConfig(hyde=str(tmp_path / "missing.md")))


def test_hyde_and_summary_prompts():
    prompts = Prompts()
    assert "Question: What was EBITDA?" in prompts.hyde("What was EBITDA?")[0]["content"]
    assert "Excerpt:\nSome report text" in prompts.summarize("Some report text")[0]["content"]


def test_worked_examples_follow_the_protocol():
    """Every example answer in the system prompt parses, and its formula evaluates to its stated value."""
    system = Prompts().answer("q", ["c"])[0]["content"]
    examples = [json.loads(line) for line in system.splitlines() if line.startswith("{")]
    assert len(examples) == 3
    for example in examples:
        assert set(example) == set(ANSWER_SCHEMA["required"])
        parsed = extract_answer(json.dumps(example))
        if parsed.final_formula is None:
            assert example["computed_formula"] == "N/A"
            continue
        assert evaluate_formula(parsed.final_formula) == pytest.approx(float(example["computed_formula"]), rel=1e-4)
    assert re.search(r"0\.145", system)  # percentages as decimals
