"""`t2rag judge RUN`: a judge model compares each judged method's answer with the baseline method's answer to the
same question, in both orders unless told otherwise, and Elo ratings are made of the verdicts.

Verdicts are written beside the run's records, under `RUN/judge/verdicts/`, in blocks as they come (one parquet
file per block, written whole or not at all), so a rerun asks only what no block holds yet; the judge's replies go
through the generation cache, so asking again costs nothing. A failed generation writes no verdict and is asked
again by the next run. The ratings go to `RUN/judge/ratings.json`.
"""

from __future__ import annotations

import logging
import math
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from t2rag.answer.extract import extract_answer
from t2rag.data import QuestionSet, load_questions
from t2rag.errors import ConfigError, InputError, ModelUnavailable
from t2rag.generation.base import ChatRequest, SamplingParams
from t2rag.generation.registry import build_generator, engine_of
from t2rag.judge.config import JudgeConfig
from t2rag.judge.ratings import ratings
from t2rag.judge.verdicts import parse_verdict
from t2rag.prompts import JUDGE_SCHEMA, PromptConfig, Prompts
from t2rag.run_folder.files import (
    MANIFEST_FILE,
    RATINGS_FILE,
    VERDICTS_DIR,
    new_part_name,
    parquet_files,
    read_manifest,
    read_records,
    write_json,
)
from t2rag.storage import join, write_bytes

log = logging.getLogger("t2rag.progress")

#: The two orders a pair is asked in: the judged method's answer shown first, or the baseline's.
ORDERS = ("method_first", "baseline_first")
BLOCK = 16  # requests per written block of verdicts

VERDICT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("subset", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("baseline", pa.string(), nullable=False),
        pa.field("judge", pa.string(), nullable=False),
        pa.field("order", pa.string(), nullable=False),
        pa.field("prompt_hash", pa.string()),
        pa.field("raw_output", pa.string()),
        pa.field("choice", pa.string()),  # 1, 2 or tie as the judge wrote it (null: unparsed)
        pa.field("winner", pa.string()),  # method, baseline or tie (null: unparsed)
        pa.field("reasoning", pa.string()),
        pa.field("nm_method", pa.bool_()),
        pa.field("nm_baseline", pa.bool_()),
        pa.field("prompt_tokens", pa.int32()),
        pa.field("completion_tokens", pa.int32()),
        pa.field("generation_s", pa.float64()),
    ]
)

_ANSWER_COLUMNS = ["id", "subset", "method", "prediction", "formula", "raw_output", "number_match"]


def check_judge(config: JudgeConfig) -> None:
    """Refuse, in one line and before any work, a judge whose model cannot be had here."""
    found = engine_of(config.judge).weights(config.judge)
    if not found.available:
        raise ModelUnavailable(f"judge '{config.judge.name}' ({config.judge.model}) cannot be loaded: {found.where}")


def answer_text(prediction: float | None, formula: str | None, raw_output: str | None) -> str:
    """An answer as a judge reads it: its value, its formula and its reasoning steps."""
    value = "none given" if prediction is None or not math.isfinite(prediction) else f"{prediction:.6g}"
    lines = [f"Value: {value}", f"Formula: {formula or 'none'}"]
    steps = extract_answer(raw_output or "").reasoning_steps
    if steps:
        lines.append("Reasoning: " + " ".join(steps)[:1500])
    return "\n".join(lines)


def reference_text(original: str | None, value: float | None) -> str:
    if original:
        return original
    return "unknown" if value is None else f"{value:.6g}"


def judge_requests(
    run_dir: str, config: JudgeConfig, prompts: Prompts, questions: QuestionSet
) -> tuple[pa.Table, list[ChatRequest]]:
    """Every (method, question, order) the judge is to be asked, as rows (the verdict keys and the two answers'
    Number Match) and their chat requests, for the pairs both methods answered."""
    records = read_records(run_dir, _ANSWER_COLUMNS)
    answered = records.filter(pc.is_valid(records.column("number_match")))
    present = list(dict.fromkeys(answered.column("method").to_pylist()))
    if config.baseline not in present:
        raise InputError(f"{run_dir}: the baseline '{config.baseline}' has no answers here (answered: "
                         f"{', '.join(present) or 'none'})")  # fmt: skip
    methods = config.methods or [m for m in present if m != config.baseline]
    missing = [m for m in methods if m not in present]
    if missing or not methods:
        why = f"no answers of {', '.join(missing)}" if missing else "no other method answered"
        raise InputError(f"{run_dir}: nothing to judge against '{config.baseline}': {why}")
    by_key = {(r["method"], r["subset"], r["id"]): r for r in answered.to_pylist()}
    columns = [questions.table.column(n).to_pylist() for n in ("subset", "id", "question", "original_answer",
                                                                "answer_value")]  # fmt: skip
    gold = {(s, i): (q, o, v) for s, i, q, o, v in zip(*columns, strict=True)}
    params = SamplingParams(
        temperature=0.0,
        max_tokens=prompts.config.judge_max_tokens,
        json_schema=JUDGE_SCHEMA if config.judge.constrained_json else None,
    )
    texts = {key: answer_text(r["prediction"], r["formula"], r["raw_output"])
             for key, r in by_key.items() if key[0] in (*methods, config.baseline)}  # fmt: skip
    judged = sorted((key for key in by_key if key[0] in methods), key=lambda key: methods.index(key[0]))  # stable
    rows, requests = [], []
    orders = ORDERS if config.both_orders else ORDERS[:1]
    for method, subset, qid in judged:
        baseline = (config.baseline, subset, qid)
        if baseline not in by_key or (subset, qid) not in gold:
            continue
        question, original, value = gold[(subset, qid)]
        pair = [texts[(method, subset, qid)], texts[baseline]]
        for order in orders:
            first, second = pair if order == "method_first" else pair[::-1]
            request = ChatRequest(prompts.judge(question, reference_text(original, value), first, second), params)
            requests.append(request)
            rows.append({"id": qid, "subset": subset, "method": method, "baseline": config.baseline,
                         "judge": config.judge.name, "order": order, "prompt_hash": request.prompt_hash(),
                         "nm_method": by_key[(method, subset, qid)]["number_match"],
                         "nm_baseline": by_key[baseline]["number_match"]})  # fmt: skip
    return pa.Table.from_pylist(rows, schema=VERDICT_SCHEMA), requests


def read_verdicts(run_dir: str) -> pa.Table:
    """Every verdict written under the run (empty when there is none)."""
    fs, files = parquet_files(run_dir, VERDICTS_DIR)
    if not files:
        return VERDICT_SCHEMA.empty_table()
    return pads.dataset(files, filesystem=fs, format="parquet", schema=VERDICT_SCHEMA).to_table()


def _keys(table: pa.Table) -> list[tuple]:
    names = ["judge", "baseline", "method", "subset", "id", "order", "prompt_hash"]
    return list(zip(*(table.column(n).to_pylist() for n in names), strict=True))


def winner_of(choice: str | None, order: str) -> str | None:
    """Which side a choice names: the judged method, the baseline, a tie, or None (unparsed)."""
    if choice is None or choice == "tie":
        return choice
    method_position = "1" if order == "method_first" else "2"
    return "method" if choice == method_position else "baseline"


def judge_run(
    run_dir: str,
    config: JudgeConfig,
    prompt_config: PromptConfig | None = None,
    data: str | None = None,
) -> dict:
    """Ask what no verdict of the run holds yet, then rate every judged method; returns (and writes) the ratings.
    `data` overrides where the run's questions are read from."""
    manifest = read_manifest(run_dir)
    if manifest is None and data is None:
        raise InputError(f"{run_dir}: no {MANIFEST_FILE}; pass --data to say where its questions are")
    chosen = ((manifest or {}).get("config") or {}).get("data") or {}
    questions = load_questions(data or chosen.get("source"), chosen.get("subsets"), chosen.get("split"))
    prompts = Prompts(prompt_config or PromptConfig())
    planned, requests = judge_requests(run_dir, config, prompts, questions)
    done = set(_keys(read_verdicts(run_dir)))
    todo = [i for i, key in enumerate(_keys(planned)) if key not in done]
    log.info("judge %s: %d verdicts to ask (%d already written)", config.judge.name, len(todo),
             len(planned) - len(todo))  # fmt: skip
    failed = 0
    if todo:
        check_judge(config)
        generator = build_generator(config.judge)
        started = time.perf_counter()
        try:
            generator.load()
            for start in range(0, len(todo), BLOCK):
                block = todo[start : start + BLOCK]
                answers = generator.generate([requests[i] for i in block])
                failed += _write_block(run_dir, planned.take(pa.array(block)), answers)
                log.info("judge %s: %d of %d asked, %.0f s", config.judge.name, min(start + BLOCK, len(todo)),
                         len(todo), time.perf_counter() - started)  # fmt: skip
        finally:
            generator.close()
    verdicts = read_verdicts(run_dir)
    mine = verdicts.filter(pc.and_(pc.equal(verdicts.column("judge"), config.judge.name),
                                   pc.equal(verdicts.column("baseline"), config.baseline)))  # fmt: skip
    mine = mine.filter(pc.is_in(mine.column("prompt_hash"), planned.column("prompt_hash")))
    result = {
        "judge": config.judge.name,
        "judge_model": config.judge.model,
        "baseline": config.baseline,
        "baseline_rating": 1000.0,
        "both_orders": config.both_orders,
        "k_factor": config.k_factor,
        "rounds": config.rounds,
        "asked": len(planned),
        "failed": failed,
        "methods": ratings(mine, config.k_factor, config.rounds, config.seed),
    }
    write_json(run_dir, RATINGS_FILE, result)
    return result


def _write_block(run_dir: str, rows: pa.Table, answers: list) -> int:
    """Write the verdicts of one block's answered requests; returns how many generations failed."""
    written = []
    for row, answer in zip(rows.to_pylist(), answers, strict=True):
        if answer.error is not None:
            continue
        choice, reasoning = parse_verdict(answer.text)
        written.append({**row, "raw_output": answer.text, "choice": choice, "winner": winner_of(choice, row["order"]),
                        "reasoning": reasoning, "prompt_tokens": answer.prompt_tokens,
                        "completion_tokens": answer.completion_tokens, "generation_s": answer.seconds})  # fmt: skip
    if written:
        write_verdicts(run_dir, pa.Table.from_pylist(written, schema=VERDICT_SCHEMA))
    return len(answers) - len(written)


def write_verdicts(run_dir: str, verdicts: pa.Table) -> str:
    """One block of verdicts as a parquet file of its own, whole or absent (`write_bytes`)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(verdicts.cast(VERDICT_SCHEMA), buffer)
    return write_bytes(join(run_dir, VERDICTS_DIR, f"{new_part_name('judge')}.parquet"), buffer.getvalue().to_pybytes())


def judge_config_from(
    block: dict | None, baseline: str | None, judge: str | None, one_order: bool = False
) -> JudgeConfig:
    """The judge to run: a run config's `judge:` block (None: none), with the command line's baseline and judge on
    top."""
    block = dict(block or {})
    if baseline:
        block["baseline"] = baseline
    if judge:
        block["judge"] = judge
    if one_order:
        block["both_orders"] = False
    if "baseline" not in block or "judge" not in block:
        raise ConfigError("say which method is the baseline and which model judges: --baseline METHOD --judge "
                          "PRESET (or a judge: block in the run's config)")  # fmt: skip
    try:
        return JudgeConfig.model_validate(block)
    except ValueError as exc:  # pydantic's; a preset it cannot resolve is a ConfigError already
        raise ConfigError(f"judge: {str(exc).splitlines()[-1].strip()}") from None
