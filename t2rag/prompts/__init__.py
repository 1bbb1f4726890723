"""Prompt templates (files in this folder) and the functions that turn them into chat messages.

Templates use `{question}`, `{contexts}` and `{context}` placeholders, filled by plain substitution so that braces
inside report text are never interpreted. Any template can be replaced from the run config with a file path.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from t2rag.errors import ConfigError
from t2rag.generation.base import Message

#: The answer object every generator is asked for (and constrained to, where the engine can).
ANSWER_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "reasoning_steps": {"type": "array", "items": {"type": "string"}},
        "final_formula": {"type": "string"},
        "computed_formula": {"type": "string"},
    },
    "required": ["reasoning_steps", "final_formula", "computed_formula"],
}

#: What a judge is asked for (and constrained to, where the engine can): which of two answers is better, and why.
JUDGE_SCHEMA: dict = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "better": {"type": "string", "enum": ["1", "2", "tie"]}},
    "required": ["reasoning", "better"],
}

TEMPLATE_NAMES = ("answer_system", "answer_user", "answer_no_context", "hyde", "summarize", "grade", "judge", "route")


class PromptConfig(BaseModel):
    """Paths that replace the packaged templates, and limits on what goes into a prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    answer_system: str | None = None
    answer_user: str | None = None
    answer_no_context: str | None = None
    hyde: str | None = None
    summarize: str | None = None
    grade: str | None = None
    judge: str | None = None
    route: str | None = None
    max_context_chars: int = Field(6000, ge=200)  # per context; longer ones are cut (most are under 6,000)
    hyde_max_tokens: int = Field(256, ge=16)
    summary_max_tokens: int = Field(200, ge=16)
    grade_max_tokens: int = Field(48, ge=8)  # a grade is `{"relevant": [...]}`
    judge_max_tokens: int = Field(256, ge=16)  # a verdict: a sentence or two of reasoning and the better answer
    route_max_tokens: int = Field(64, ge=8)  # the LLM router's ranking of the subsets' names


def _read(name: str, override: str | None) -> str:
    if override:
        try:
            return Path(override).expanduser().read_text()
        except OSError as exc:
            raise ConfigError(f"prompt template {name}: cannot read {override} ({exc.strerror})") from exc
    return resources.files(__package__).joinpath(f"{name}.md").read_text()


#: What ends a context cut to `max_context_chars`.
CLIP_MARKER = "\n[... excerpt shortened ...]"


def _fill(template: str, **values: str) -> str:
    out = template
    for key, value in values.items():
        out = out.replace("{" + key + "}", value)
    return out.strip()


#: A one-character question for measuring a template: templates are stripped once filled, so an empty one would
#: lose their trailing space.
STAND_IN = "?"


def chars_of(messages: tuple[Message, ...] | list[Message]) -> int:
    """Characters of a prompt's messages."""
    return sum(len(m["content"]) for m in messages)


class Prompts:
    """Loaded templates for one run."""

    def __init__(self, config: PromptConfig | None = None):
        self.config = config or PromptConfig()
        self.templates = {name: _read(name, getattr(self.config, name)) for name in TEMPLATE_NAMES}

    def _clip(self, text: str) -> str:
        limit = self.config.max_context_chars
        return text if len(text) <= limit else text[:limit] + CLIP_MARKER

    def shown_length(self, length: int) -> int:
        """Characters a context of `length` characters takes in a prompt (as `_clip` cuts it)."""
        limit = self.config.max_context_chars
        return length if length <= limit else limit + len(CLIP_MARKER)

    def format_contexts(self, contexts: list[str]) -> str:
        return "\n\n".join(f"### Excerpt {i}\n{self._clip(c)}" for i, c in enumerate(contexts, 1))

    def answer(self, question: str, contexts: list[str]) -> tuple[Message, ...]:
        """System + user messages asking for the JSON answer; no contexts means the pretrained-only prompt."""
        if contexts:
            user = _fill(self.templates["answer_user"], contexts=self.format_contexts(contexts), question=question)
        else:
            user = _fill(self.templates["answer_no_context"], question=question)
        return (
            {"role": "system", "content": self.templates["answer_system"].strip()},
            {"role": "user", "content": user},
        )

    def hyde(self, question: str) -> tuple[Message, ...]:
        return ({"role": "user", "content": _fill(self.templates["hyde"], question=question)},)

    def grade(self, question: str, contexts: list[str]) -> tuple[Message, ...]:
        """The prompt asking which of the numbered excerpts help answer the question."""
        filled = _fill(self.templates["grade"], contexts=self.format_contexts(contexts), question=question)
        return ({"role": "user", "content": filled},)

    def judge(self, question: str, reference: str, first: str, second: str) -> tuple[Message, ...]:
        """The prompt asking a judge which of two answers to a question is more accurate against its reference."""
        filled = _fill(self.templates["judge"], question=question, reference=reference, first=first, second=second)
        return ({"role": "user", "content": filled},)

    def route(self, question: str, descriptions: dict[str, str]) -> tuple[Message, ...]:
        """The prompt asking a generator to rank the named collections (subsets) by how likely each holds the
        question's answer."""
        collections = "\n".join(f"- {name}: {text}" for name, text in descriptions.items())
        filled = _fill(self.templates["route"], collections=collections, question=question)
        return ({"role": "user", "content": filled},)

    def summarize(self, context: str) -> tuple[Message, ...]:
        return ({"role": "user", "content": _fill(self.templates["summarize"], context=self._clip(context))},)
