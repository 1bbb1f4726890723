"""What a run's `judge:` block will ask, before anything runs: the pairs of answers, the judge's prompts and tokens,
and the seconds at the judge model's rate (unknown where no rate names it). `t2rag plan` shows it beside the run's
own work."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from t2rag.config import RunConfig
from t2rag.data import QuestionSet
from t2rag.estimate.rates import DEFAULT_ANSWER_TOKENS, Rates, position_sum
from t2rag.judge.run import ORDERS, answer_text
from t2rag.methods import ANSWER_TAIL
from t2rag.prompts import Prompts
from t2rag.stages.work import work_left


@dataclass(frozen=True)
class JudgePlan:
    """The judge's work: pairs per judged method, prompts (pairs x orders) and their tokens, and seconds."""

    judge: str
    model: str
    baseline: str
    pairs: dict[str, int]
    prompts: int
    prompt_tokens: int
    output_tokens: int
    seconds: float | None  # None: no rate known for the judge model
    note: str

    def to_dict(self) -> dict:
        return asdict(self)


def plan_judge(config: RunConfig, questions: QuestionSet, rates: Rates) -> JudgePlan | None:
    """The judge's work for the questions the run answers (all of them, done or not); None without a judge."""
    judge = config.judge
    if judge is None:
        return None
    answered: dict[str, set[tuple[str, str]]] = {}
    for group in work_left(config, questions):
        if group.stages[-len(ANSWER_TAIL) :] != ANSWER_TAIL:
            continue
        rows = zip(group.rows.column("method").to_pylist(), group.rows.column("subset").to_pylist(),
                   group.rows.column("id").to_pylist(), strict=True)  # fmt: skip
        for method, subset, qid in rows:
            answered.setdefault(method, set()).add((subset, qid))
    baseline = answered.get(judge.baseline, set())
    judged = judge.methods or [m for m in config.methods if m != judge.baseline and m in answered]
    pairs = {m: len(answered.get(m, set()) & baseline) for m in judged}
    orders = len(ORDERS) if judge.both_orders else 1
    prompts = Prompts(config.prompts)
    rate = rates.generators.get(judge.judge.model)
    chars_per_token = (rate.chars_per_token if rate else None) or config.estimate.chars_per_token
    # An answer's length is known only once it is generated: its formula and reasoning stand in at the answering
    # generator's answer length.
    answerer = rates.generators.get(config.generator.model) if config.generator else None
    answer_tokens = answerer.answer_tokens if answerer else DEFAULT_ANSWER_TOKENS
    stand_in = answer_text(1.0, "x", None) + " " * int(answer_tokens * chars_per_token)
    keyed = {(s, i): (q, o) for s, i, q, o in zip(
        *(questions.table.column(c).to_pylist() for c in ("subset", "id", "question", "original_answer")),
        strict=True)}  # fmt: skip
    chars = 0
    for key in baseline:
        question, original = keyed.get(key, ("", ""))
        shared = sum(len(m["content"]) for m in prompts.judge(question, original or "", stand_in, stand_in))
        chars += shared * orders * sum(1 for m in judged if key in answered.get(m, set()))
    count = sum(pairs.values()) * orders
    prompt_tokens = int(chars / chars_per_token)
    output_tokens = count * config.prompts.judge_max_tokens
    seconds = None
    note = f"no rate for {judge.judge.model}: add it to a rates file (estimate.rates)"
    if rate is not None:
        mean = prompt_tokens / max(count, 1)
        seconds = rate.work_s(prompt_tokens, count * position_sum(mean, mean), output_tokens) + rate.load_s
        note = f"at {rate.source}"
    return JudgePlan(judge.judge.name, judge.judge.model, judge.baseline, pairs, count, prompt_tokens, output_tokens,
                     seconds, note)  # fmt: skip
