"""The `t2rag` command line. Every command prints a table, or one JSON object with `--json`.

Bad input exits with status 2 and a single line on stderr, `t2rag: error: <reason>`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from t2rag.errors import InputError, T2RagError, first_line
from t2rag.quiet import quiet_libraries

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        print(f"t2rag: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data",
        default=None,
        help="hub id[@revision], local directory or s3:// prefix (default: bundled sample)",
    )
    p.add_argument("--subsets", type=_csv, default=None, help="comma-separated subsets, e.g. FinQA,TAT-DQA")
    p.add_argument("--split", default=None, help="split to load (default: all present)")


#: Where `--json` documents go: the real stdout, while everything else printed during the command goes to stderr.
_json_out: TextIO | None = None


def print_json(obj: object) -> None:
    print(json.dumps(_finite(obj), indent=None, sort_keys=False), file=_json_out or sys.stdout)


def _finite(obj: object) -> object:
    """JSON has no NaN: metrics that could not be computed become null."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def cmd_data_stats(args: argparse.Namespace) -> int:
    from t2rag.data import load_questions, subset_stats
    from t2rag.results.tables import markdown_table

    qs = load_questions(args.data, args.subsets, args.split)
    if len(qs) == 0:
        raise InputError(f"{qs.source}: the data holds no questions")
    stats = subset_stats(qs)
    if args.json:
        print_json({"source": qs.source, "subsets": stats})
        return 0
    rows = [
        [name, ", ".join(s["splits"]), s["questions"], s["contexts"], len(s["excluded"]), s["non_numeric_answers"]]
        for name, s in stats.items()
    ]
    print(f"source: {qs.source}")
    print(markdown_table(["subset", "splits", "questions", "contexts", "excluded", "non-numeric answers"], rows))
    if not any(s["questions"] for s in stats.values()):
        print("a corpus-only source: contexts without questions, to extend a run's corpora (data.distractors)")
    for name, s in stats.items():
        if s["excluded"]:
            print(f"{name} excluded: {', '.join(s['excluded'][:20])}{' ...' if len(s['excluded']) > 20 else ''}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from t2rag.data import load_questions
    from t2rag.results.scoring import read_predictions, score_predictions
    from t2rag.results.tables import scorecard_table

    qs = load_questions(args.data, args.subsets, args.split)
    result = score_predictions(qs, read_predictions(args.predictions), only_predicted=args.only_predicted)
    counts = result["predictions"] if "methods" in result else {"": result["predictions"]}
    if args.json:
        print_json(result)
    elif "methods" in result:
        for name, scorecard in result["methods"].items():
            print(f"## {name}\n{scorecard_table(scorecard)}\n{_counts_line(counts[name])}\n")
    else:
        print(f"{scorecard_table(result)}\n{_counts_line(counts[''])}")
    problems = sum(c["unreadable"] + c["unknown"] + c["missing"] for c in counts.values())
    if args.strict and problems:
        print(f"t2rag: error: {problems} predictions are unreadable, unknown or missing (--strict)", file=sys.stderr)
        return 1
    return 0


def _counts_line(c: dict[str, int]) -> str:
    scope = "scored as wrong" if c["missing_scored_wrong"] else "not scored"
    return (
        f"predictions: {c['rows']} rows, {c['answered']} answered, {c['unreadable']} unreadable, "
        f"{c['unanswered']} unanswered (null), {c['unknown']} unknown ids, {c['excluded']} excluded questions; "
        f"{c['missing']} scorable questions missing ({scope})"
    )


def data_overrides(args: argparse.Namespace) -> dict:
    """The `data` fields `add_data_args` set on the command line, as RunConfig overrides ({} when none is)."""
    data = {k: v for k, v in (("source", args.data), ("subsets", args.subsets), ("split", args.split)) if v is not None}
    return {"data": data} if data else {}


def config_overrides(args: argparse.Namespace) -> dict:
    """Nested RunConfig fields set on the command line (unset flags leave the config file's values)."""
    out: dict = data_overrides(args)
    for flag, key in (
        ("methods", "methods"),
        ("out", "out"),
        ("limit", "limit"),
        ("seed", "seed"),
        ("runner", "runner"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            out[key] = value
    if args.retrieval_only:
        out["retrieval_only"] = True
    if args.k is not None:
        out["retrieval"] = {"k": args.k}
    generator = {
        key: value
        for key, value in (
            ("preset", args.generator),
            ("base_url", args.base_url),
            ("model", args.model),
            ("tensor_parallel_size", args.tensor_parallel_size),
            ("replicas", args.replicas),
        )
        if value is not None
    }
    if generator:
        out["generator"] = generator
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    from t2rag.config import load_config
    from t2rag.pipeline.local import run_local
    from t2rag.results.tables import methods_table

    logging.getLogger("t2rag.progress").setLevel(logging.INFO)
    config = load_config(args.config, config_overrides(args))
    if config.tracking.mlflow is not None:  # an unreachable tracking server is refused before the run, not after
        from t2rag.results.tracking import check_tracking

        check_tracking(config.tracking, config.out)
    if config.runner == "ray":
        from ray_jobs.evaluate import run_ray

        result = run_ray(config, overwrite=args.overwrite)
    else:
        result = run_local(config, overwrite=args.overwrite)
    if config.tracking.mlflow is not None:
        from t2rag.results.tracking import log_single_run

        result["mlflow_run_id"] = log_single_run(config, result["out"])
    if args.json:
        print_json(result)
        return 0
    print(f"\nData: {result['data']['source']}")
    for name, d in result["data"]["subsets"].items():
        print(f"  {name}: {', '.join(d['splits'])}, {d['questions']} questions against {d['contexts']} contexts")
    ranked = {m: s for m, s in result["methods"].items() if "mrr@3" in s["weighted"]}
    answered = {m: s for m, s in result["methods"].items() if "number_match" in s["weighted"]}
    if ranked:
        print("\nRetrieval, every question (%):")
        print(methods_table(ranked, ["mrr@3", "recall@1", "recall@3", "recall@5"]))
    if answered:
        print("\nNumber Match (%) of the generated answers, with its 95% interval; `generated` is the sample size:")
        print(methods_table(answered, ["generated", "number_match"]))
        family = {m: s for m, s in answered.items() if "exe_acc" in s["weighted"] or "em" in s["weighted"]}
        if family:
            print("\nThe same answers by the family's yardsticks (%): TAT-QA's exact match (em) and F1 against the "
                  "original answers, FinQA's execution accuracy (exe_acc):")  # fmt: skip
            print(methods_table(family, ["em", "f1", "exe_acc"]))
    out = result["out"]
    print(f"\nrecords: {out}/records  result: {out}/result.json  plots and the paper beside: t2rag report {out}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from ray_jobs.preflight import make_plan, render
    from t2rag.config import load_config
    from t2rag.sweep.spec import is_sweep_file

    overrides = data_overrides(args)
    if args.price_per_gpu_hour is not None:
        overrides["estimate"] = {"price_per_gpu_hour": args.price_per_gpu_hour}
    if args.config is not None and is_sweep_file(args.config):
        return plan_of_sweep(args, overrides)
    config = load_config(args.config, overrides)
    plan = make_plan(config, plan_target(args, config))
    if args.json:
        print_json(plan.to_dict())
    else:
        print(render(plan))
    if plan.refusal:
        print(f"t2rag: error: {plan.refusal}", file=sys.stderr)
        return 2
    return 0


def plan_target(args: argparse.Namespace, config):
    """The cluster `t2rag plan` plans against: a launcher file or manifest, a live cluster, or this machine."""
    from ray_jobs.preflight import cluster_file_target, live_target, local_target

    if args.cluster:
        from ray_jobs.cluster_file import check_cluster_file
        from ray_jobs.kuberay import check_manifest, is_manifest, load_manifest

        if is_manifest(args.cluster):
            problems = check_manifest(load_manifest(args.cluster))
        else:
            problems = check_cluster_file(args.cluster)
        for problem in problems:
            print(f"t2rag: warning: {args.cluster}: {problem}", file=sys.stderr)
        return cluster_file_target(args.cluster, args.max_workers)
    if args.address:
        return live_target(args.address)
    return local_target(config)


def plan_of_sweep(args: argparse.Namespace, overrides: dict) -> int:
    from ray_jobs.sweep_plan import plan_sweep, render_sweep_plan
    from t2rag.sweep.spec import load_sweep

    sweep = load_sweep(args.config, base_overrides=overrides)
    base = (sweep.trials[0] if sweep.trials else sweep.trial({})).config
    plan = plan_sweep(sweep, plan_target(args, base))
    if args.json:
        print_json(plan.to_dict())
    else:
        print(render_sweep_plan(plan))
    if plan.refusal:
        print(f"t2rag: error: {plan.refusal}", file=sys.stderr)
        return 2
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from ray_jobs.sweep import run_final, run_sweep
    from t2rag.sweep.report import headline
    from t2rag.sweep.spec import load_sweep

    logging.getLogger("t2rag.progress").setLevel(logging.INFO)
    sweep = load_sweep(args.sweep, args.out)
    if args.final:
        result = run_final(sweep, args.final, args.split)
        if args.json:
            print_json(result)
        else:
            print(f"final: {args.final} on {args.split}: {result['out']} (t2rag report {sweep.out})")
        return 0
    table = run_sweep(sweep, args.address, args.yes)
    if args.json:
        print_json(table.to_dict())
        return 0
    print(headline(table))
    print(f"\ntable: {sweep.out}/table.md  plots: t2rag report {sweep.out}")
    return 0 if all(r.status == "finished" for r in table.rows) else 1


def cmd_report(args: argparse.Namespace) -> int:
    from t2rag.results.report import write_report
    from t2rag.storage import read_bytes
    from t2rag.sweep.report import is_sweep_folder

    if is_sweep_folder(args.run_dir):
        from t2rag.sweep.report import headline, write_sweep_report
        from t2rag.sweep.table import sweep_table

        table = sweep_table(args.run_dir)
        written = write_sweep_report(args.run_dir, table)
        if args.json:
            print_json(written)
            return 0
        print(headline(table))
        print(f"\nThe table, the plots and the best trial in one page: {written['report']}")
        return 0
    written = write_report(args.run_dir, args.out, args.paper)
    if args.json:
        print_json(written)
        return 0
    print(f"Report for {args.run_dir}\n")
    print(read_bytes(written["headline"]).decode())
    print(f"All tables and plots in one page: {written['report']}")
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    from t2rag.judge.ratings import ratings_table
    from t2rag.judge.run import judge_config_from, judge_run
    from t2rag.prompts import PromptConfig
    from t2rag.results.tables import markdown_table
    from t2rag.run_folder.files import read_manifest

    logging.getLogger("t2rag.progress").setLevel(logging.INFO)
    manifest = read_manifest(args.run_dir) or {}
    settings = manifest.get("config") or {}
    if args.config:
        from t2rag.config import load_config

        settings = load_config(args.config).model_dump()
    config = judge_config_from(settings.get("judge"), args.baseline, args.judge, args.one_order)
    prompts = PromptConfig.model_validate(settings.get("prompts") or {})
    result = judge_run(args.run_dir, config, prompts, data=args.data)
    if args.json:
        print_json(result)
        return 0
    orders = "both orders" if result["both_orders"] else "one order"
    print(f"\n{result['judge']} ({result['judge_model']}) gave {result['asked']} verdicts against {result['baseline']} "
          f"({orders}); Elo with the baseline fixed at 1000, 95% intervals from resampling questions:\n")  # fmt: skip
    print(markdown_table(*ratings_table(result)))
    if result["failed"]:
        print(f"\n{result['failed']} judge generations failed; rerun the same command to ask them again")
    print(f"\nverdicts: {args.run_dir}/judge/verdicts  ratings: {args.run_dir}/judge/ratings.json")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from t2rag.results.compare import compare_runs
    from t2rag.results.findings import difference_rows
    from t2rag.results.significance import significant
    from t2rag.results.tables import markdown_table

    found = compare_runs(args.a, args.b)
    if args.json:
        print_json([d.as_dict() for d in found])
        return 0
    print(f"A = {args.a}, B = {args.b}: A - B in points over the questions both scored\n")
    print(markdown_table(*difference_rows(found, significant(found))))
    print("\nnumber_match, em, exe_acc and recall@k: McNemar's exact test; f1, mrr@k and ndcg@k: paired randomization "
          "(10,000 sign flips); 'holds': Holm at 0.05 over the rows of one metric and subset.")  # fmt: skip
    return 0


def cmd_explore(args: argparse.Namespace) -> int:
    from t2rag.results.explore.app import serve_run
    from t2rag.sweep.report import is_sweep_folder

    if is_sweep_folder(args.run_dir):
        from t2rag.results.tables import markdown_table
        from t2rag.sweep.table import sweep_table, table_rows

        table = sweep_table(args.run_dir)
        print(markdown_table(*table_rows(table)))
        print(f"\nEach trial is a run: t2rag explore {args.run_dir}/trials/TRIAL")
        return 0

    def ready(url: str) -> None:
        print(f"t2rag explore: {args.run_dir} at {url} (Ctrl-C stops)", flush=True)

    serve_run(args.run_dir, args.host, args.port, args.data, on_ready=ready)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from t2rag.results.export import export_leaderboard

    done = export_leaderboard(args.run_dir, args.out, args.method, args.partial)
    if args.json:
        print_json(asdict(done))
    else:
        print(
            f"wrote {done.path}: {done.questions} questions of method {done.method} ({done.origin}), "
            f"{done.with_contexts} with ranked contexts, {done.with_prediction} with a prediction"
        )
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from t2rag import plugins
    from t2rag.config import load_config
    from t2rag.methods import METHODS, ROUTERS
    from t2rag.results.tables import markdown_table

    if args.config:
        load_config(args.config)  # its plugins: and rank_fusion: entries register their methods
    plugins.load_plugins()
    listed = []
    for m in METHODS.values():
        origin = plugins.origin_of("t2rag.methods", m.name)
        listed.append({"name": m.name, "stages": list(m.chain(generate=True)), "retriever": m.retriever,
                       "origin": origin.source, "version": origin.version})  # fmt: skip
    if args.json:
        print_json(listed)
        return 0
    rows = [[m["name"], m["retriever"] or "-", " -> ".join(m["stages"]), plugins.label(m["origin"], m["version"])]
            for m in listed]  # fmt: skip
    print(markdown_table(["method", "retriever", "stages", "origin"], rows))
    print(f"\nAny retrieving method also runs as METHOD@ROUTER, ROUTER one of: {', '.join(ROUTERS)}.")
    return 0


def cmd_fit_fusion(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from t2rag.config import load_config
    from t2rag.resources import Resources
    from t2rag.retrieval.fusion.fit import best_fit, fit_fusion, fit_subsets, require_dev_split, write_config

    config = load_config(args.config, data_overrides(args))
    require_dev_split(config.data.split)  # before any data is loaded
    resources = Resources(config)
    subsets = fit_subsets(resources.questions, resources.corpus)
    results = fit_fusion(config.retrieval, subsets, config.data.split, args.methods)
    best = best_fit(results, args.max_cost)
    out: dict = {"fits": [{**asdict(r), "weights": r.weights.model_dump()} for r in results], "best": best.method}
    if args.write:
        command = "t2rag " + " ".join(sys.argv[1:] if args.argv is None else args.argv)
        data = config.data
        where = (
            f"{data.source or 'the bundled sample'} ({', '.join(data.subsets or ['every subset'])}, split {data.split})"
        )
        write_config(args.write, results, best, command, where, config.retrieval, args.max_cost)
        out["config"] = args.write
    if args.json:
        print_json(out)
        return 0
    for r in results:
        weights = ", ".join(f"{c} {w:g}" for c, w in r.weights.model_dump().items() if w)
        print(
            f"{r.method}: {weights}; MRR@3 {r.mrr_at_3} on {r.questions} dev questions "
            f"(held-out halves {r.held_out_mrr_at_3}), Recall@1 {r.recall_at_1} (held-out {r.held_out_recall_at_1}), "
            f"Recall@5 {r.recall_at_5}, cost {r.cost_vs_bm25}x BM25"
        )
    budget = f" within {args.max_cost:g}x BM25's cost" if args.max_cost else ""
    print(f"best{budget}: {best.method}" + (f"; wrote {args.write}" if args.write else ""))
    return 0


def cmd_rates_measure(args: argparse.Namespace) -> int:
    from t2rag.config import load_config
    from t2rag.estimate.calibrate import embeds, plugins_to_measure, write_rates

    overrides = data_overrides(args)
    if args.generator:
        overrides["generator"] = args.generator
    config = load_config(args.config, overrides)
    if config.runner == "ray" and config.generator is not None:  # on a node of the kind its replicas use
        from ray_jobs.rates_probe import measure_on_cluster

        rates = measure_on_cluster(config)
    else:
        from t2rag.estimate.calibrate import measure_rates

        rates = measure_rates(config)
    write_rates(rates, args.out)
    measured = {}
    if config.generator is not None:
        measured["generator"] = rates.generators[config.generator.model].model_dump()
    if embeds(config):
        measured["embedder"] = rates.embedders[config.retrieval.embedder.model].model_dump()
    measured.update({f"plugin {name}": rates.plugins[name].model_dump() for name in plugins_to_measure(config)})
    if args.json:
        print_json({"out": args.out, **measured})
        return 0
    for role, rate in measured.items():
        print(f"{role}: {rate['source']}")
    print(f"wrote {args.out}; plan with it: estimate: {{rates: {args.out}}} in the config")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from t2rag.retrieval.config import RetrievalConfig

    default_k = RetrievalConfig.model_fields["k"].default
    parser = _Parser(prog="t2rag", description=__doc__)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    data = commands.add_parser("data", help="inspect the benchmark data")
    data_cmds = data.add_subparsers(dest="data_command", required=True, parser_class=_Parser)
    stats = data_cmds.add_parser("stats", help="question and context counts, exclusions, non-numeric answers")
    add_data_args(stats)
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(func=cmd_data_stats)

    score = commands.add_parser("score", help="score a predictions file or a run's records")
    add_data_args(score)
    score.add_argument("--predictions", required=True, help="JSONL or parquet with id and prediction/context_ids")
    score.add_argument(
        "--only-predicted",
        action="store_true",
        help="score only the questions the file has rows for (default: every scorable one; missing ones are wrong)",
    )
    score.add_argument(
        "--strict", action="store_true", help="exit 1 when predictions are unreadable, unknown or missing"
    )
    score.add_argument("--json", action="store_true")
    score.set_defaults(func=cmd_score)

    ev = commands.add_parser("eval", help="run methods on the benchmark and score them")
    ev.add_argument("--config", default=None, help="YAML run config (flags override its fields)")
    add_data_args(ev)
    ev.add_argument("--methods", type=_csv, default=None, help="comma-separated method names")
    ev.add_argument("--retrieval-only", action="store_true", help="retrieval metrics only, no generation")
    ev.add_argument("--k", type=int, default=None, help=f"contexts per question (default {default_k})")
    ev.add_argument("--limit", type=int, default=None, help="seeded sample of N questions per subset for generation")
    ev.add_argument("--seed", type=int, default=None)
    ev.add_argument(
        "--generator",
        default=None,
        help="generator preset: smollm2-135m, qwen2.5-0.5b, qwen2.5-1.5b, openai, vllm, ...",
    )
    ev.add_argument("--base-url", default=None, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    ev.add_argument("--model", default=None, help="model name or path for the generator")
    ev.add_argument("--tensor-parallel-size", type=int, default=None)
    ev.add_argument("--replicas", type=int, default=None)
    ev.add_argument("--out", default=None, help="output directory or s3:// prefix")
    ev.add_argument("--runner", choices=["local", "ray"], default=None, help="this process, or Ray")
    ev.add_argument("--overwrite", action="store_true", help="replace results of a different config in --out")
    ev.add_argument("--json", action="store_true")
    ev.set_defaults(func=cmd_eval)

    pl = commands.add_parser(
        "plan", help="a run's work, pools, fit on a cluster and time/GPU-hour estimate, before anything runs"
    )
    pl.add_argument("--config", default=None, help="YAML run config")
    add_data_args(pl)
    target = pl.add_mutually_exclusive_group()
    target.add_argument(
        "--cluster",
        default=None,
        help="a Ray cluster launcher file, or a KubeRay RayJob, RayCluster or RayService manifest: plan against the "
        "largest cluster it can scale to",
    )
    target.add_argument("--address", default=None, help="a running Ray cluster (e.g. ray://head:10001 or auto)")
    pl.add_argument("--max-workers", type=int, default=None, help="with --cluster: at most this many worker nodes")
    pl.add_argument("--price-per-gpu-hour", type=float, default=None, help="price of one GPU-hour, for the cost")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_plan)

    rep = commands.add_parser("report", help="paper-shaped tables and plots from a run's records")
    rep.add_argument("run_dir", help="a run's output directory (local or s3://)")
    rep.add_argument("--out", default=None, help="where to write (default RUN_DIR/report)")
    rep.add_argument("--paper", default=None, help="the paper's numbers in t2rag/reference/paper.yaml's layout")
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(func=cmd_report)

    cmp = commands.add_parser(
        "compare", help="paired significance tests between two runs or methods, over the questions both scored"
    )
    cmp.add_argument("a", metavar="A", help="RUN_DIR or RUN_DIR:METHOD")
    cmp.add_argument("b", metavar="B", help="RUN_DIR or RUN_DIR:METHOD")
    cmp.add_argument("--json", action="store_true", help="a JSON list of differences, nothing else on stdout")
    cmp.set_defaults(func=cmd_compare)

    jdg = commands.add_parser(
        "judge", help="a judge model compares each method's answers with a baseline's; Elo ratings from the verdicts"
    )
    jdg.add_argument("run_dir", help="a run's output directory (local or s3://)")
    jdg.add_argument("--baseline", default=None, help="the method every other is compared with (rated 1000)")
    jdg.add_argument("--judge", default=None, help="the judge model: a generator preset name")
    jdg.add_argument("--one-order", action="store_true", help="ask each pair once, the judged answer first")
    jdg.add_argument("--config", default=None, help="a run config whose judge: block (and prompts) to use")
    jdg.add_argument("--data", help="where the run's questions are read from, if not where its manifest says")
    jdg.add_argument("--json", action="store_true")
    jdg.set_defaults(func=cmd_judge)

    swp = commands.add_parser(
        "sweep", help="a grid or search of runs as one Ray Tune experiment: resumable, tracked, one table"
    )
    swp.add_argument("sweep", help="a sweep file (base config, grid:/search:, objective:, out:)")
    swp.add_argument("--address", default=None, help="a running Ray cluster (default: a local one)")
    swp.add_argument("--out", default=None, help="override the sweep's out")
    swp.add_argument("--yes", action="store_true", help="run a sweep larger than its max_trials")
    swp.add_argument("--final", metavar="TRIAL", default=None,
                     help="evaluate this trial's config once on the held-out split and mark it final")  # fmt: skip
    swp.add_argument("--split", default="test", help="with --final: the held-out split (default test)")
    swp.add_argument("--json", action="store_true")
    swp.set_defaults(func=cmd_sweep)

    xpl = commands.add_parser("explore", help="a local web page over a run: its tables, plots and every answer")
    xpl.add_argument("run_dir", help="the run's directory (local or s3://)")
    xpl.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    xpl.add_argument("--port", type=int, default=8765, help="the port (0: any free one)")
    xpl.add_argument("--data", help="where the run's questions are read from, if not where its manifest says")
    xpl.set_defaults(func=cmd_explore)

    exp = commands.add_parser("export", help="write a run's records in another format (the leaderboard's JSONL)")
    exp.add_argument("run_dir", help="a run's output directory (local or s3://)")
    exp.add_argument("--format", choices=["leaderboard"], default="leaderboard")
    exp.add_argument("--out", required=True, help="file to write (local or s3://)")
    exp.add_argument("--method", default=None, help="the method to export (needed when the run has several)")
    exp.add_argument(
        "--partial", action="store_true", help="allow questions without a record (default: every one is required)"
    )
    exp.add_argument("--json", action="store_true")
    exp.set_defaults(func=cmd_export)

    rates = commands.add_parser("rates", help="the throughputs `t2rag plan` assumes")
    rates_cmds = rates.add_subparsers(dest="rates_command", required=True, parser_class=_Parser)
    measure = rates_cmds.add_parser(
        "measure",
        help="measure the run's generator, embedder and plugins on this machine (or a node of the run's cluster)",
    )
    measure.add_argument("--config", default=None, help="YAML run config (its generator, methods and data)")
    add_data_args(measure)
    measure.add_argument("--generator", default=None, help="a generator preset, replacing the config's")
    measure.add_argument("--out", default="rates.measured.yaml", help="the rates file to write")
    measure.add_argument("--json", action="store_true")
    measure.set_defaults(func=cmd_rates_measure)

    mth = commands.add_parser("methods", help="every method: its stages, its retriever and where it comes from")
    mth.add_argument("--json", action="store_true", help="a JSON list of {name, stages, retriever, origin, version}")
    mth.add_argument("--config", default=None, help="also the methods its plugins: and rank_fusion: register")
    mth.set_defaults(func=cmd_methods)

    fit = commands.add_parser("fit-fusion", help="fit the fused retrievers' weights on a dev split")
    fit.add_argument("--config", default=None, help="YAML run config whose retrieval settings to use")
    add_data_args(fit)
    fit.set_defaults(split="dev")
    fit.add_argument("--methods", type=_csv, default=None, help="fused methods to fit (default: every fused method)")
    fit.add_argument("--write", default=None, help="write a retrieval-only run config of the best fit here")
    fit.add_argument(
        "--max-cost",
        type=float,
        default=3.0,
        help="the best fit is the best within this many times plain BM25's cost per question (0: no budget)",
    )
    fit.add_argument("--json", action="store_true")
    fit.set_defaults(func=cmd_fit_fusion, argv=None)

    for register in _extra_commands():
        register(commands)
    return parser


def _extra_commands() -> Sequence[Callable[[argparse._SubParsersAction], None]]:
    """Commands defined next to the front ends they start (`t2rag serve` lives in serve/cli.py)."""
    from serve.cli import register as register_serve

    return [register_serve]


#: Flags renamed since they were released: the old name gets one line naming its successor (exit 2).
RENAMED_FLAGS = {"--engine": "--runner"}


def renamed_flag(argv: Sequence[str]) -> str | None:
    """The error for the first renamed flag in `argv` (None: there is none)."""
    for arg in argv:
        name = arg.split("=", 1)[0]
        if name in RENAMED_FLAGS:
            return f"{name} is now {RENAMED_FLAGS[name]}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    renamed = renamed_flag(sys.argv[1:] if argv is None else argv)
    if renamed is not None:
        print(f"t2rag: error: {renamed}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is not None:
        args.argv = list(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    quiet_libraries(args.verbose)
    global _json_out
    saved_fd = None
    if getattr(args, "json", False):
        # Ray forwards worker and raylet lines to the driver's stdout, libraries print there too, and processes this
        # one starts (vLLM's engine core) write to its file descriptor 1: during a --json command, descriptor 1 is
        # stderr, and only the one JSON document goes to the real stdout (a copy of the original descriptor).
        if sys.stdout is sys.__stdout__:
            sys.stdout.flush()
            saved_fd = os.dup(1)
            os.dup2(2, 1)
            _json_out = os.fdopen(os.dup(saved_fd), "w")
        else:  # stdout is an object of the caller's (a test capturing it): swap objects only
            _json_out = sys.stdout
        sys.stdout = sys.stderr
    try:
        return args.func(args)
    except T2RagError as exc:
        print(f"t2rag: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # storage: an unreachable s3:// endpoint, a missing bucket, a full disk, ...
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"t2rag: error: {where}{first_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("t2rag: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # anything else (a Ray failure included) ends here, never in an interpreter hook
        logging.getLogger(__name__).debug("unexpected error", exc_info=True)
        print(f"t2rag: error: {type(exc).__name__}: {first_line(exc)} (-vv shows the traceback)", file=sys.stderr)
        return 1
    finally:
        if saved_fd is not None:
            assert _json_out is not None
            _json_out.close()
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
            sys.stdout, _json_out = sys.__stdout__, None
        elif _json_out is not None:
            sys.stdout, _json_out = _json_out, None


if __name__ == "__main__":
    raise SystemExit(main())
