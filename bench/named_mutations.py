"""The mutations issues 40 and 81 found surviving the tests, each applied to the code in turn, with the test that must now
fail: proof that each test can fail when its feature breaks.

    python bench/named_mutations.py [--only SUBSTRING] [--vllm]

For each mutation: the source edit is applied (and always undone), the named tests run in a fresh pytest process,
and the mutation counts as caught when they fail. Prints a markdown table; exits 1 if any mutation survives.
The vLLM one needs the CPU build (`make vllm`) and runs with `--vllm`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    what: str
    edits: tuple[tuple[str, str, str], ...]  # (file, text, replacement); the text must occur exactly once
    tests: tuple[str, ...]
    vllm: bool = False


MUTATIONS = [
    Mutation(
        "plan: the evaluation's time summed over its pools instead of its slowest",
        (("ray_jobs/preflight.py", "else max(t.seconds for t in evaluate)", "else sum(t.seconds for t in evaluate)"),),
        ("tests/ray_jobs/test_preflight.py::test_the_estimate_waits_for_the_slowest_evaluation_pool_and_indexes_one_pool_after_another",),
    ),
    Mutation(
        "plan: the generator's rate not scaled by its replicas",
        (("t2rag/estimate/pools.py", "scale = pool.shape.actors * (pool.shape.gpus", "scale = 1 * (pool.shape.gpus"),),
        ("tests/ray_jobs/test_preflight.py::test_more_generator_replicas_share_its_work",),
    ),
    Mutation(
        "check_fit: index pools placed without the held generator",
        (("ray_jobs/preflight.py", "fit([*held, p], nodes)", "fit([p], nodes)"),),
        ("tests/ray_jobs/test_preflight.py::test_the_generator_service_is_placed_with_every_index_pool_and_with_the_evaluation",),
    ),
    Mutation(
        "check_fit: evaluation pools placed without the held generator",
        (("ray_jobs/preflight.py", "fit([*held, *evaluate], nodes)", "fit([*evaluate], nodes)"),),
        ("tests/ray_jobs/test_preflight.py::test_the_generator_service_is_placed_with_every_index_pool_and_with_the_evaluation",),
    ),
    Mutation(
        "plan text: 'Fits: yes' whatever the fit",
        (("ray_jobs/preflight.py", "lines.append(f\"Fits: {'yes' if refusal is None else 'NO: ' + refusal}\")",
          "lines.append(\"Fits: yes\")"),),
        ("tests/ray_jobs/test_preflight.py::test_the_generator_service_is_placed_with_every_index_pool_and_with_the_evaluation",),
    ),
    Mutation(
        "declarations: the rerank stage declared on another pool kind",
        (("t2rag/stages/rerank.py", 'pool = "rerank"', 'pool = "light"'),),
        ("tests/stages/test_declarations.py::test_every_stage_class_has_its_place_and_its_pool",),
    ),
    Mutation(
        "declarations: parse_answers never adds a column it declares (formula_ok)",
        (("t2rag/stages/answer.py", '{name: pa.array(v, SCORE_TYPES[name]) for name, v in cols.items() if name != "outcome"}',
          '{name: pa.array(v, SCORE_TYPES[name]) for name, v in cols.items() if name not in ("outcome", "formula_ok")}'),),
        ("tests/stages/test_declarations.py::test_each_stage_adds_what_it_declares_on_every_chain",),
    ),
    Mutation(
        "declarations: parse_answers needs its optional `reference` column (the KeyError of old)",
        (("t2rag/stages/answer.py", 'references = column(batch, "reference")',
          'references = batch.column("reference").to_pylist()'),),
        ("tests/stages/test_declarations.py::test_each_stage_adds_what_it_declares_on_every_chain",),
    ),
    Mutation(
        "declarations: read_contexts needs its optional `corpus`/`subset` column (found by the strengthened test)",
        (("t2rag/stages/answer.py", 'keys = (with_search_keys(batch), ("method", "_corpus")) if named else (batch, ("method",))',
          'keys = (with_search_keys(batch), ("method", "_corpus"))'),),
        ("tests/stages/test_declarations.py::test_each_stage_adds_what_it_declares_on_every_chain",),
    ),
    Mutation(
        "vector store: flat=True ignored on a table with an ANN index",
        (("t2rag/retrieval/dense/vector_store.py", "if flat or not self.uses_ann:", "if not self.uses_ann:"),),
        ("tests/retrieval/dense/test_vector_store.py::test_an_ann_index_above_the_size_searches_through_it",),
    ),
    Mutation(
        "vector store: the reported recall@10 measured against the ANN search itself",
        (("t2rag/retrieval/dense/vector_store.py", "exact, _ = self.search(probes, 10, flat=True)",
          "exact, _ = self.search(probes, 10)"),),
        ("tests/retrieval/dense/test_vector_store.py::test_an_ann_index_above_the_size_searches_through_it",),
    ),
    Mutation(
        "extract: no repair budget",
        (("t2rag/answer/extract.py", "if close is not None and close - position < repair_budget:",
          "if close is not None:"),),
        ("tests/answer/test_extract.py::test_pathological_inputs_are_fast_enough",),
    ),
    Mutation(
        "workload: summarization's answers read k whole contexts instead of k summaries",
        (("t2rag/estimate/workload.py", 'each = summary_chars if method.reader == "retrieved_summary" else clipped[subset]',
          "each = clipped[subset]"),),
        ("tests/estimate/test_workload.py::test_summarization_reads_k_summaries_and_summaries_read_each_context",),
    ),
    Mutation(
        "workload: HyDE prompts counted without their template",
        (("t2rag/stages/hyde.py", "return n * (chars_of(prompts.hyde(STAND_IN)) - len(STAND_IN)) + question_chars,",
          "return question_chars,"),),
        ("tests/estimate/test_workload.py::test_hyde_documents_are_counted_from_their_real_prompts",),
    ),
    Mutation(
        "workload: contexts counted whole, not cut to max_context_chars",
        (("t2rag/estimate/workload.py", "prompts.shown_length(len(t)) for t in texts", "len(t) for t in texts"),),
        ("tests/estimate/test_workload.py::test_contexts_are_counted_as_clipped_by_max_context_chars",),
    ),
    Mutation(
        "paper reference: a one-point typo no weighted average reveals (ConvFinQA 47.4 -> 48.4)",
        (("t2rag/reference/paper.yaml", "ConvFinQA: {number_match: 47.4,", "ConvFinQA: {number_match: 48.4,"),),
        ("tests/reference/test_paper.py::test_every_cell_is_the_transcribed_tables",),
    ),
    Mutation(
        "generator service: a hung engine never timed out",
        (("ray_jobs/generator_service.py", "return ray.get(replica.generate.remote(batch), timeout=self.timeout_s)",
          "return ray.get(replica.generate.remote(batch))"),
         ("ray_jobs/generator_service.py", "done.append(ray.get(ref, timeout=self.timeout_s))",
          "done.append(ray.get(ref))")),
        ("tests/ray_jobs/test_generator_service.py::test_a_generator_that_stops_answering_is_detected_in_time",),
    ),
    Mutation(
        "served chat: the stated answer is the raw float, not the parsed answer as written",
        (("t2rag/answer/readable.py", 'answer = f"Answer: {number_text(prediction)}"', 'answer = f"Answer: {prediction!r}"'),),
        ("tests/answer/test_readable.py::test_the_reply_ends_with_the_answer_as_written",
         "tests/serve/test_openai.py::test_a_chat_completion_answers_with_the_rag_parts_beside"),
    ),
    Mutation(
        "served parsing (shared by /answer and the chat route) reads an empty answer instead of the generation",
        (("serve/answering.py", "{name: pa.array([value]) for name, value in generation.items()}",
          '{name: pa.array(["{}" if name == "raw_output" else value]) for name, value in generation.items()}'),),
        ("tests/serve/test_openai.py::test_the_chat_route_ranks_and_answers_as_the_core",
         "tests/serve/test_app.py::test_a_generated_number_is_the_served_prediction"),
    ),
    Mutation(
        "/answer: the prediction dropped",
        (("serve/answering.py", '"prediction": prediction if prediction is not None and math.isfinite(prediction) else None,',
          '"prediction": None,'),),
        ("tests/serve/test_app.py::test_answer_with_retrieval", "tests/serve/test_app.py::test_answer_oracle_reads_the_given_context",
         "tests/serve/test_app.py::test_a_generated_number_is_the_served_prediction"),
    ),
    Mutation(
        "vLLM: the batch run reads no number where the served one does",
        (("t2rag/stages/answer.py", "cols[\"prediction\"].append(pred.value)",
          "cols[\"prediction\"].append(float('nan') if batch.num_rows > 1 else pred.value)"),),
        ("tests/generation/test_vllm_cpu.py::test_records_equal_those_through_vllm_serve",),
        vllm=True,
    ),
    # Issue 53: mutations of the newest code that passed the tests covering their module.
    Mutation(
        "significance: the randomization test one-sided (no absolute value on the permuted sums)",
        (("t2rag/results/significance.py", "np.sum(np.abs(signs @ nonzero) >= observed", "np.sum((signs @ nonzero) >= observed"),),
        ("tests/results/test_significance.py::test_the_randomization_test_is_two_sided",),
    ),
    Mutation(
        "significance: the paired questions taken as A's instead of those both scored",
        (("t2rag/results/significance.py", "keys = sorted(a.keys() & b.keys())", "keys = sorted(a.keys())"),
         ("t2rag/results/significance.py", "vb = np.asarray([b[k] for k in keys])", "vb = np.asarray([b.get(k, 0.0) for k in keys])")),
        ("tests/results/test_significance.py::test_only_the_questions_both_scored_are_paired",),
    ),
    Mutation(
        "compare: the same-data check ignoring the pooled corpus and distractors",
        (("t2rag/results/compare.py", 'for key in ("subsets", "pooled_corpus", "distractors")}', 'for key in ("subsets",)}'),),
        ("tests/results/test_compare.py::test_runs_on_a_pooled_or_padded_corpus_are_not_paired_with_plain_ones",),
    ),
    Mutation(
        "compare: a single named method checked against its own side instead of the other",
        (("t2rag/results/compare.py", "other = b if a.method else a", "other = a if a.method else b"),),
        ("tests/results/test_compare.py::test_one_named_method_must_be_on_the_other_side",),
    ),
    Mutation(
        "findings: the headline lists the smallest differences first",
        (("t2rag/results/findings.py", "-abs(d.diff)))", "abs(d.diff)))"),),
        ("tests/results/test_findings.py::test_the_headline_lists_the_largest_differences_first",),
    ),
    Mutation(
        "findings: the run's retrieval.k ignored (always 3)",
        (("t2rag/results/findings.py", 'return int((((manifest or {}).get("config") or {}).get("retrieval") or {}).get("k") or 3)', "return 3"),),
        ("tests/results/test_findings.py::test_outcomes_read_the_runs_own_k",),
    ),
    Mutation(
        "outcomes: the gap to the oracle over the method's questions instead of those both answered",
        (("t2rag/run_folder/outcomes.py", "common = sorted(mine.keys() & theirs.keys())", "common = sorted(mine.keys())"),
         ("t2rag/run_folder/outcomes.py", 'o = np.asarray([theirs[i] for i in common], dtype=object) == "correct"',
          'o = np.asarray([theirs.get(i) for i in common], dtype=object) == "correct"')),
        ("tests/run_folder/test_outcomes.py::test_the_gap_counts_only_questions_both_answered",),
    ),
    Mutation(
        "explore: a page of the question list sliced offset:limit",
        (("t2rag/results/explore/index.py", "found[offset : offset + limit]", "found[offset:limit]"),),
        ("tests/results/explore/test_index.py::test_pages_follow_one_another",),
    ),
    Mutation(
        "explore: /api/context of an unknown id answers 200 with a null text",
        (("t2rag/results/explore/app.py", "        if text is None:\n            raise HTTPException(404, f\"context '{context_id}' is not in the run's data\")\n", ""),),
        ("tests/results/explore/test_index.py::test_a_context_is_served_by_id_and_an_unknown_one_is_404",),
    ),
    Mutation(
        "fusion_fit: the held-out score computed on the half it was fitted on",
        (("t2rag/retrieval/fusion/fit.py", "fit_weights(parts, components, 1 - f), f)", "fit_weights(parts, components, f), f)"),),
        ("tests/retrieval/fusion/test_fit.py::test_held_out_scores_each_half_with_the_other_halfs_weights",),
    ),
    Mutation(
        "fusion_fit: Recall@5 counting ranks below 5",
        (("t2rag/retrieval/fusion/fit.py", "recall += float((rank <= 5).sum())", "recall += float((rank <= 10).sum())"),),
        ("tests/retrieval/fusion/test_fit.py::test_scores_of_known_ranks",),
    ),
    Mutation(
        "fusion_fit: best_fit keeping fits above the cost budget",
        (("t2rag/retrieval/fusion/fit.py", "if max_cost is None or r.cost_vs_bm25 <= max_cost]", "]"),),
        ("tests/retrieval/fusion/test_fit.py::test_the_best_fit_stays_within_the_cost_budget",),
    ),
    Mutation(
        "durable: a relative out not resolved under T2RAG_STORAGE before the working-directory check",
        (("ray_jobs/durable.py", "    config = resolve_storage(config)\n    if not in_ray_job():", "    if not in_ray_job():"),),
        ("tests/ray_jobs/test_durable.py::test_storage_root_resolves_relative_paths",),
    ),
    Mutation(
        "durable: a path checked against the working directory without resolving it (`..` leads back in)",
        (("ray_jobs/durable.py", "local = Path(path).expanduser().resolve()", "local = Path(path).expanduser()"),),
        ("tests/ray_jobs/test_durable.py::test_a_path_that_resolves_into_the_working_directory_is_refused",),
    ),
    Mutation(
        "durable: an absolute path under the current directory refused in a job without a working directory",
        (("ray_jobs/durable.py", 'return "working_dir" in _job_runtime_env() and local.is_relative_to', "return local.is_relative_to"),),
        ("tests/ray_jobs/test_durable.py::test_without_a_working_directory_a_path_under_the_current_one_is_durable",),
    ),
    Mutation(
        "grammar_first: a repeat penalty silently dropped on the grammar-first path",
        (("t2rag/generation/grammar_first.py", '        and options.get("repeat_penalty", 1.0) == 1.0\n', ""),),
        ("tests/generation/test_grammar_first.py::test_only_neutral_greedy_options_take_the_grammar_first_path",),
    ),
    Mutation(
        "vllm_engine: Serve LLM's prefix-aware router set only when prefix_reuse is off",
        (("t2rag/generation/vllm_engine.py", "    if generator.prefix_reuse:\n        deployment[", "    if not generator.prefix_reuse:\n        deployment["),),
        ("tests/generation/test_vllm_engine.py::test_the_prefix_aware_router_follows_prefix_reuse",),
    ),
    Mutation(
        "registry: a sampling override replaces the preset's whole sampling",
        (("t2rag/generation/registry.py", 'spec["sampling"] = {**merged["sampling"], **spec["sampling"]}', 'spec["sampling"] = dict(spec["sampling"])'),),
        ("tests/generation/test_config.py::test_a_sampling_override_keeps_the_presets_other_sampling",),
    ),
    Mutation(
        "fused: the dense component's weight ignored",
        (("t2rag/retrieval/fusion/weighted.py", "self._add_dense(dense, block, w.dense)", "self._add_dense(dense, block, 1.0)"),),
        ("tests/retrieval/fusion/test_weighted.py::test_every_weight_scales_its_component",),
    ),
    Mutation(
        "fused: the lexical weight ignored",
        (("t2rag/retrieval/fusion/weighted.py", "fused = scale_lexical(self.lexical, best_lexical, weights.lexical, in_place)", "fused = scale_lexical(self.lexical, best_lexical, 1.0, in_place)"),),
        ("tests/retrieval/fusion/test_weighted.py::test_every_weight_scales_its_component",),
    ),
    Mutation(
        "serve lanes: an admission slot freed only when a retrieval fails",
        (("serve/lanes.py", "        finally:\n            lane.admission.done()", "        except BaseException:\n            lane.admission.done()\n            raise"),),
        ("tests/serve/test_lanes.py::test_successful_retrievals_free_their_admission_slots",),
    ),
    Mutation(
        "served chat: the request's temperature dropped before the generator",
        (("serve/answering.py", '"temperature": body.temperature if body.temperature is not None else default.temperature,', '"temperature": default.temperature,'),),
        ("tests/serve/test_answering.py::test_a_chats_parameters_and_system_text_reach_the_generator",),
    ),
    Mutation(
        "served chat: the client's system message dropped before the generator",
        (("serve/answering.py", 'json.loads(self.request["messages_json"]), system, turns)', 'json.loads(self.request["messages_json"]), "", turns)'),),
        ("tests/serve/test_answering.py::test_a_chats_parameters_and_system_text_reach_the_generator",),
    ),
    # Issue 51: the estimate's arithmetic.
    Mutation(
        "plan: GPU-hours without the evaluation pools' GPUs",
        (("ray_jobs/preflight.py", "gpu_hours = (held + indexing + streaming) / 3600", "gpu_hours = (held + indexing) / 3600"),),
        ("tests/ray_jobs/test_preflight.py::test_gpu_hours_count_every_pool_for_the_time_it_holds_its_gpus",),
    ),
    Mutation(
        "plan: answers timed by every prompt token (prefix reuse ignored)",
        (("t2rag/estimate/pools.py", "rate.work_s(g.to_compute, g.positions(), g.output_tokens)", "rate.work_s(g.prompt_tokens, g.positions(), g.output_tokens)"),),
        ("tests/ray_jobs/test_preflight.py::test_answer_time_is_the_tokens_to_compute_over_the_rate_per_gpu_of_every_replica",),
    ),
    Mutation(
        "plan: a GPU rate not scaled by a replica's GPUs",
        (("t2rag/estimate/pools.py", 'scale = pool.shape.actors * (pool.shape.gpus if rate.device == "gpu" else 1.0)', "scale = pool.shape.actors * 1.0"),),
        ("tests/ray_jobs/test_preflight.py::test_answer_time_is_the_tokens_to_compute_over_the_rate_per_gpu_of_every_replica",),
    ),
    Mutation(
        'issue 81, workload: position sum over chars_per_token once',
        (('t2rag/estimate/workload.py', 'in_tokens = positions / chars_per_token**2', 'in_tokens = positions / chars_per_token'),),
        ('tests/estimate/test_figures.py::test_the_answers_position_sum_is_in_tokens_squared',),
    ),
    Mutation(
        "issue 81, workload: the rate's chars_per_token ignored",
        (('t2rag/estimate/workload.py', 'return measure_workload(config, resources, work, answer_tokens, rate.chars_per_token if rate else None)', 'return measure_workload(config, resources, work, answer_tokens, None)'),),
        ('tests/estimate/test_figures.py::test_the_plan_counts_tokens_with_the_generators_measured_ratio',),
    ),
    Mutation(
        'issue 81, workload: passage tokens not capped at the window',
        (('t2rag/estimate/workload.py', 'return sum(n * min(self.passage_tokens[k], window) for k, n in self.passages.items())', 'return sum(n * self.passage_tokens[k] for k, n in self.passages.items())'),),
        ('tests/estimate/test_figures.py::test_passage_tokens_are_capped_at_the_embedders_window',),
    ),
    Mutation(
        'issue 81, rates: position_sum + computed',
        (('t2rag/estimate/rates.py', 'return computed * (2 * length - computed) / 1000', 'return computed * (2 * length + computed) / 1000'),),
        ('tests/estimate/test_figures.py::test_position_sum_is_the_summed_positions_of_the_computed_tokens',),
    ),
    Mutation(
        'issue 81, rates: embedding time ignores the actors',
        (('t2rag/estimate/rates.py', 'speed = (self.gpu_tokens_per_s * gpus if gpus else self.cpu_tokens_per_s * cpus) * actors', 'speed = self.gpu_tokens_per_s * gpus if gpus else self.cpu_tokens_per_s * cpus'),),
        ('tests/estimate/test_figures.py::test_embedding_time_divides_the_tokens_among_every_actor',),
    ),
    Mutation(
        'issue 81, plan_vs_run: records without prompt tokens counted',
        (('t2rag/estimate/plan_vs_run.py', '    mine = records.filter(pc.and_(pc.is_in(keys, pa.array(plan["keys"], pa.string())),\n                                  pc.is_valid(records.column("prompt_tokens"))))  # fmt: skip', '    mine = records.filter(pc.is_in(keys, pa.array(plan["keys"], pa.string())))'),),
        ('tests/estimate/test_figures.py::test_records_without_prompt_tokens_are_not_answers',),
    ),
    Mutation(
        'issue 81, model_check: summary methods need no generator',
        (('t2rag/methods.py', 'return "generate" in self.stages or self.index_texts == "summary"', 'return "generate" in self.stages'),),
        ('tests/pipeline/test_model_check.py::test_a_summary_index_needs_the_generator_even_when_only_retrieving',),
    ),
    Mutation(
        'issue 81, scorecards: non-numeric references of unanswered records',
        (('t2rag/run_folder/scorecards.py', 'non_numeric = generated & pc.is_null(table.column("reference")).to_numpy(zero_copy_only=False)', 'non_numeric = pc.is_null(table.column("reference")).to_numpy(zero_copy_only=False)'),),
        ('tests/run_folder/test_scorecards.py::test_non_numeric_references_are_counted_among_the_answered_only',),
    ),
    Mutation(
        'issue 81, files: read_result prefers summary.json',
        (('t2rag/run_folder/files.py', '    result = read_json(out, RESULT_FILE)\n    return result if result is not None else read_json(out, EARLIER_RESULT_FILE)', '    result = read_json(out, EARLIER_RESULT_FILE)\n    return result if result is not None else read_json(out, RESULT_FILE)'),),
        ('tests/run_folder/test_files.py::test_the_result_is_read_before_an_older_runs_summary',),
    ),
    Mutation(
        'issue 81, placement: light stages join one-shard retrieval actors',
        (('ray_jobs/placement.py', '    if r.holds_every_shard:\n        return kind\n    if kind == "light"', '    if kind == "light"'),),
        ('tests/ray_jobs/test_placement_rules.py::test_light_stages_join_the_retrieval_unless_each_retrieval_actor_holds_one_shard',),
    ),
    Mutation(
        'issue 81, preflight: index fit leaves out the generator service',
        (('ray_jobs/preflight.py', 'fit([*held, p], nodes) for p in pools if p.phase == "index"}', 'fit([p], nodes) for p in pools if p.phase == "index"}'),),
        ('tests/ray_jobs/test_placement_rules.py::test_an_index_pool_must_fit_beside_the_generator_service',),
    ),
]  # fmt: skip


def apply(mutation: Mutation) -> dict[Path, str]:
    """Apply the edits; the original texts by file, for `restore`."""
    originals: dict[Path, str] = {}
    for name, old, new in mutation.edits:
        path = ROOT / name
        originals.setdefault(path, path.read_text())
        current = path.read_text()
        if current.count(old) != 1:
            restore(originals)
            raise SystemExit(f"{name}: the text to mutate occurs {current.count(old)} times: {old!r}")
        path.write_text(current.replace(old, new))
    return originals


def restore(originals: dict[Path, str]) -> None:
    for path, text in originals.items():
        path.write_text(text)


def run_tests(mutation: Mutation, timeout_s: int) -> tuple[bool, float, str]:
    """Whether the tests failed under the mutation, the seconds they took, and their last line."""
    python = ROOT / ".venv-vllm/bin/python" if mutation.vllm else Path(sys.executable)
    env = dict(os.environ)
    if mutation.vllm:
        env.update(T2RAG_MODELS=str(ROOT / ".venv-vllm/models"), T2RAG_REQUIRE_VLLM="1")
    started = time.monotonic()
    cmd = [str(python), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", f"--timeout={timeout_s}", *mutation.tests]
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s + 120)
    except subprocess.TimeoutExpired:
        return True, time.monotonic() - started, "killed after the time limit (the tests hung)"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return done.returncode != 0, time.monotonic() - started, lines[-1] if lines else done.stderr[-200:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=None, help="only the mutations whose description contains this")
    parser.add_argument("--vllm", action="store_true", help="also the mutation checked by the vLLM CPU suite")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per mutation's tests")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if (args.vllm or not m.vllm) and (args.only is None or args.only in m.what)]
    print("| mutation | test that must fail | caught | seconds | last line |")
    print("|---|---|---|---:|---|")
    survived = 0
    for mutation in chosen:
        originals = apply(mutation)
        try:
            caught, seconds, last = run_tests(mutation, args.timeout)
        finally:
            restore(originals)
        survived += not caught
        tests = ", ".join(t.split("::")[-1] for t in mutation.tests)
        print(f"| {mutation.what} | {tests} | {'yes' if caught else 'NO'} | {seconds:.0f} | {last[:100]} |", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
