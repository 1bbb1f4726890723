"""What a run asks of its models, counted from the data before anything runs: questions to retrieve for, prompts to
generate and their tokens, contexts to embed and summarise.

Counts come from the core plan (`work_left`), so a resumed run counts only what is left. Where a method's answer
prompts need no model to make (no context, the gold context, or a lexical retrieval), the plan makes them as the
run will, with the run's own stages, so their characters are the run's; prompts shared in part are then counted to
compute as a prefix-reusing engine computes them (in the run's prefix order, each prompt's prefix in common with the
one before it is reused). Other methods' prompts (dense retrieval, HyDE, grades) are estimated from the corpus's
mean context length. Tokens are characters divided by `chars_per_token`: a generator's measured ratio from its rates
(`t2rag rates measure`), else the default, calibrated on the paper's Table 2 (its mean Llama 3.3 token counts per
context over the same contexts' mean characters: 4.71 for FinQA and for TAT-DQA).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.config import RunConfig
from t2rag.estimate.rates import DEFAULT_ANSWER_TOKENS, Rates, position_sum
from t2rag.generation.prefix import prefix_order
from t2rag.methods import Method, get_method
from t2rag.prompts import STAND_IN, Prompts, chars_of
from t2rag.resources import Resources
from t2rag.stages import STAGES, Stage, built
from t2rag.stages.base import run_chain
from t2rag.stages.work import WorkGroup


@dataclass(frozen=True)
class Generation:
    """Prompts of one kind sent to the generator, with their estimated tokens: in total, and those an engine
    computes when prompts that share a prefix run together (`generator.prefix_reuse`; None: all of them)."""

    prompts: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    computed_tokens: int | None = None
    #: `t2rag.estimate.rates.position_sum` summed over the prompts, in tokens. None: known from the means only.
    position_sum: float | None = None

    @property
    def to_compute(self) -> int:
        """Prompt tokens to compute."""
        return self.prompt_tokens if self.computed_tokens is None else self.computed_tokens

    def __add__(self, other: Generation) -> Generation:
        computed = None
        if self.computed_tokens is not None or other.computed_tokens is not None:
            computed = self.to_compute + other.to_compute
        positions = None
        if self.position_sum is not None or other.position_sum is not None:
            positions = self.positions() + other.positions()
        return Generation(
            self.prompts + other.prompts,
            self.prompt_tokens + other.prompt_tokens,
            self.output_tokens + other.output_tokens,
            computed,
            positions,
        )

    def positions(self) -> float:
        """`position_sum`, or its estimate from the mean prompt when it was not known prompt by prompt."""
        if self.position_sum is not None:
            return self.position_sum
        if not self.prompts:
            return 0.0
        return self.prompts * position_sum(self.prompt_tokens / self.prompts, self.to_compute / self.prompts)


@dataclass(frozen=True)
class MethodWork:
    """One method on one subset: questions it ranks and prompts it generates."""

    method: str
    subset: str
    retrievals: int  # questions ranked
    dense_queries: int  # of those, questions embedded for a dense search
    reranked_pairs: int  # (question, context) pairs a cross-encoder scores
    #: Generations before the answer: HyDE's documents, the grades of retrieved contexts.
    pre_answer: Generation = field(default_factory=Generation)
    answers: Generation = field(default_factory=Generation)


@dataclass(frozen=True)
class Workload:
    """Everything a run will compute, before it runs."""

    methods: list[MethodWork]
    summaries: dict[str, Generation]  # corpus -> one summary per context
    passages: dict[str, int]  # corpus -> contexts to embed (for dense methods)
    passage_tokens: dict[str, float]  # corpus -> mean estimated tokens per context
    question_tokens: float  # mean estimated tokens per question
    chars_per_token: float

    def total(self, kind: str) -> Generation:
        """All prompts of one kind: "answers", "pre_answer" or "summaries"."""
        parts = list(self.summaries.values()) if kind == "summaries" else [getattr(m, kind) for m in self.methods]
        return sum(parts, Generation())

    def embedded_passage_tokens(self, window: int) -> float:
        """Tokens an embedder reads of the passages to embed, each cut to its `window`."""
        return sum(n * min(self.passage_tokens[k], window) for k, n in self.passages.items())

    def embedded_query_tokens(self, window: int) -> float:
        """Tokens a query encoder reads (see `query_embeddings`), each cut to its `window`."""
        return self.query_embeddings() * min(self.question_tokens, window)

    def query_embeddings(self) -> int:
        """Questions a query encoder embeds: once per question for every method searching with the question
        itself (a block embeds a question once for them all), plus HyDE's documents."""
        per_subset: dict[str, int] = {}
        for m in self.methods:
            if not _own_query(m.method):
                per_subset[m.subset] = max(per_subset.get(m.subset, 0), m.dense_queries)
        return sum(per_subset.values()) + sum(m.dense_queries for m in self.methods if _own_query(m.method))

    def to_dict(self) -> dict:
        return asdict(self)


def measure_workload(
    config: RunConfig,
    resources: Resources,
    work: list[WorkGroup],
    answer_tokens: int,
    chars_per_token: float | None = None,
) -> Workload:
    """The workload of the planned rows `work` (see `t2rag.stages.work.work_left`); each answer is assumed to
    be `answer_tokens` long (at most the generator's `max_tokens`), and a token `chars_per_token` characters long
    (None: `estimate.chars_per_token`)."""
    chars_per_token = chars_per_token or config.estimate.chars_per_token
    prompts = resources.prompts
    if config.generator is not None:
        answer_tokens = min(answer_tokens, config.generator.sampling.max_tokens)
    k = config.retrieval.k
    corpora = {s: resources.corpus(s if not config.data.pooled_corpus else None) for s in resources.questions.subsets}
    clipped = {s: _mean_clipped(c.texts, prompts) for s, c in corpora.items()}
    summary_chars = prompts.config.summary_max_tokens * chars_per_token

    def tokens(chars: float) -> int:
        return round(chars / chars_per_token)

    system_chars = chars_of(prompts.answer(STAND_IN, [])[:1])
    reuse = config.generator is not None and config.generator.prefix_reuse
    known = known_answer_prompts(resources, work)
    known_computed = _computed_prompts(known, config, reuse)
    cells: dict[tuple[str, str], dict] = {}
    for group in work:
        answering = group.stages[-1] == "parse_answers"
        for (method_name, subset), rows in _by_method_and_subset(group):
            method = get_method(method_name)
            cell = cells.setdefault((method_name, subset), _empty_cell())
            n = rows.num_rows
            question_chars = int(pc.sum(pc.utf8_length(rows.column("question"))).as_py() or 0)
            if method.retrieves:
                cell["retrievals"] += n
                cell["dense"] += n if method.searches_vectors else 0
                cell["pairs"] += n * config.retrieval.reranker.candidate_factor * k if "rerank" in method.stages else 0
            for maker in _prompt_makers(method.stages):
                chars, most = maker.planned_prompts(prompts, n, question_chars, method.texts_read(k), clipped[subset])
                cell["pre_answer"] += Generation(n, tokens(chars), n * most)
            if answering and (method_name, subset) in known:
                chars, computed, positions = known_computed[(method_name, subset)]
                in_tokens = positions / chars_per_token**2
                cell["answers"] += Generation(n, tokens(chars), n * answer_tokens, tokens(computed), in_tokens)
            elif answering:
                count = method.texts_read(k)  # as read_contexts reads them
                each = summary_chars if method.reader == "retrieved_summary" else clipped[subset]
                # Contexts enter the prompt by characters only: the prompt around `count` excerpts, plus each
                # excerpt's mean length as the prompt shows it (clipped).
                chars = n * (_answer_overhead(prompts, count) + count * each) + question_chars
                computed = _computed_chars(prompts, count, each, rows, n, chars, system_chars) if reuse else chars
                cell["answers"] += Generation(n, tokens(chars), n * answer_tokens, tokens(computed))
    methods = [
        MethodWork(
            method=m,
            subset=s,
            retrievals=c["retrievals"],
            dense_queries=c["dense"],
            reranked_pairs=c["pairs"],
            pre_answer=c["pre_answer"],
            answers=c["answers"],
        )
        for (m, s), c in cells.items()
    ]
    summaries, passages = {}, {}
    for name in config.methods:
        method = get_method(name)
        if method.index_texts == "summary":
            overhead = chars_of(prompts.summarize(""))
            for s, corpus in corpora.items():
                n = len(corpus)
                chars = n * (overhead + clipped[s])
                summaries[corpus.name] = Generation(n, tokens(chars), n * prompts.config.summary_max_tokens)
        if method.searches_vectors:
            for corpus in corpora.values():
                passages[f"{corpus.name}/{method.index_texts}"] = len(corpus)
    passage_tokens = {  # an embedder reads whole contexts (up to its own window), not the prompts' cut ones
        f"{c.name}/{t}": (_mean_length(c.texts) if t == "context" else summary_chars) / chars_per_token
        for s, c in corpora.items()
        for t in ("context", "summary")
        if f"{c.name}/{t}" in passages
    }
    scored = resources.questions.scored()
    question_chars = pc.mean(pc.utf8_length(scored.column("question"))).as_py() or 0.0
    return Workload(methods, summaries, passages, passage_tokens, question_chars / chars_per_token, chars_per_token)


def planned_workload(config: RunConfig, resources: Resources, work: list[WorkGroup], rates: Rates) -> Workload:
    """The workload as a plan counts it: answers as long as the config says, else its generator's rates, else
    DEFAULT_ANSWER_TOKENS, and tokens of the generator's measured characters where its rates have them."""
    rate = rates.generators.get(config.generator.model) if config.generator else None
    answer_tokens = config.estimate.answer_tokens or (rate.answer_tokens if rate else DEFAULT_ANSWER_TOKENS)
    return measure_workload(config, resources, work, answer_tokens, rate.chars_per_token if rate else None)


#: At most this many answer prompts are made ahead (about 15 KB each); a larger run's are estimated.
MADE_AHEAD_ROWS = 5000


def prompts_known_ahead(method: Method) -> bool:
    """Whether a method's answer prompts can be made before the run without a model: it reads no context, the
    gold one, or contexts a lexical retriever ranks."""
    if method.reader in ("none", "gold"):
        return True
    return method.reader == "retrieved_context" and method.stages == ("retrieve",)


def known_answer_prompts(resources: Resources, work: list[WorkGroup]) -> dict[tuple[str, str], list[str]]:
    """{(method, subset): the answer prompts (request `messages_json`)} of the answered rows whose prompts need no
    model, made by the run's own stages up to `answer_prompts`; none when there are more than `MADE_AHEAD_ROWS`
    (a large run's prompts are estimated instead of held)."""
    parts = []
    for group in work:
        if group.stages[-1] != "parse_answers" or "answer_prompts" not in group.stages:
            continue
        methods = group.rows.column("method")
        known = [m for m in dict.fromkeys(methods.to_pylist()) if prompts_known_ahead(get_method(m))]
        if known:
            parts.append((group, group.rows.filter(pc.is_in(methods, pa.array(known, pa.string())))))
    if sum(rows.num_rows for _, rows in parts) > MADE_AHEAD_ROWS:
        return {}
    out: dict[tuple[str, str], list[str]] = {}
    for group, rows in parts:
        upto = group.stages[: group.stages.index("answer_prompts") + 1]
        made = run_chain(built(resources, upto), rows)
        keys = zip(made.column("method").to_pylist(), made.column("subset").to_pylist(), strict=True)
        for key, messages in zip(keys, made.column("messages_json").to_pylist(), strict=True):
            out.setdefault(key, []).append(messages)
    return out


def _computed_prompts(
    known: dict[tuple[str, str], list[str]], config: RunConfig, reuse: bool
) -> dict[tuple[str, str], tuple[float, float, float]]:
    """Per (method, subset) of the known prompts: their characters, those computed, and their position sum in
    characters (see `Generation.position_sum`). With `reuse`, the prompts run in the run's prefix order and each
    reuses the prefix it shares with the one before it (the system prompt is computed once per replica)."""
    keyed = [(key, m) for key, ms in known.items() for m in ms]
    out = {key: [0.0, 0.0, 0.0] for key in known}
    if not keyed:
        return {}
    order = prefix_order([m for _, m in keyed]).tolist()
    before = ""
    for i in order:
        key, messages = keyed[i]
        text = "".join(m["content"] for m in json.loads(messages))
        computed = len(text) - (_common_prefix(before, text) if reuse else 0)
        cell = out[key]
        cell[0] += len(text)
        cell[1] += computed
        cell[2] += position_sum(len(text), computed)
        before = text
    if reuse:
        replicas = config.generator.replicas if config.generator is not None else 1
        key, messages = keyed[order[0]]
        system = len(json.loads(messages)[0]["content"])
        out[key][1] += (replicas - 1) * system
        out[key][2] += (replicas - 1) * position_sum(system, system)
    return {key: (c[0], c[1], c[2]) for key, c in out.items()}


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of a and b: `bisect` over prefix lengths, comparing slices (a
    character loop in Python is slow on prompts of thousands of characters)."""
    n = min(len(a), len(b))
    return bisect.bisect_left(range(n + 1), True, key=lambda m: a[:m] != b[:m]) - 1


def _computed_chars(prompts: Prompts, count: int, each: float, rows, n: int, chars: float, system_chars: int) -> float:
    """Characters of `n` answer prompts an engine computes when the prompts that share a prefix run together: the
    system prompt once, and the leading context once per gold context among the rows. That context is the gold
    one for the oracle; for a retrieving method it is assumed to be, which holds for the questions its retriever
    ranks first correctly (the rest share less, and methods that lead with the same context share more)."""
    if not count:
        return chars - (n - 1) * system_chars
    leading = _answer_overhead(prompts, count) - _answer_overhead(prompts, max(count - 1, 1)) + each
    distinct = int(pc.count_distinct(rows.column("context_id")).as_py() or 0)
    return chars - (n - 1) * system_chars - (n - distinct) * leading


def _empty_cell() -> dict:
    return {"retrievals": 0, "dense": 0, "pairs": 0, "pre_answer": Generation(), "answers": Generation()}


def _prompt_makers(stages: tuple[str, ...]) -> list[type[Stage]]:
    """The stage that makes the prompts of each `generate` in a ranking chain (the one before it)."""
    return [STAGES[stages[i - 1]] for i, name in enumerate(stages) if name == "generate"]


def _own_query(method: str) -> bool:
    """Whether the method embeds a query of its own (HyDE's document) instead of the question."""
    return "hyde_query" in get_method(method).stages


def _by_method_and_subset(group: WorkGroup):
    rows = group.rows
    keys = pc.binary_join_element_wise(rows.column("method"), rows.column("subset"), "\x00")
    for key in dict.fromkeys(keys.to_pylist()):
        method, subset = key.split("\x00")
        yield (method, subset), rows.filter(pc.equal(keys, key))


def _answer_overhead(prompts: Prompts, count: int) -> int:
    """Characters of an answer prompt around its question and `count` excerpts' texts."""
    return chars_of(prompts.answer(STAND_IN, [""] * count)) - len(STAND_IN)


def _mean_length(texts: list[str]) -> float:
    return float(np.mean([len(t) for t in texts])) if texts else 0.0


def _mean_clipped(texts: list[str], prompts: Prompts) -> float:
    """Mean characters of a context as a prompt shows it (cut to `max_context_chars`, with the cut's marker)."""
    if not texts:
        return 0.0
    return float(np.mean([prompts.shown_length(len(t)) for t in texts]))
