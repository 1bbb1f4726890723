"""`t2rag report RUN_DIR`: paper-shaped tables and plots from a run's records alone.

Writes, under `RUN_DIR/report/`: table3 (Number Match and MRR@3 per subset and weighted, one row per method),
retrieval (every retrieval metric), retrieval_ablation (when methods beyond the paper's ran: the components each has
on, with MRR@3 and Recall@1/3/5 per subset and weighted), routing (routed methods beside their own-subset and pooled
search), answers (Number Match beside TAT-QA's EM and F1 and FinQA's execution and program accuracy, with the EM
misses of scale and sign), judge (the machine judge's Elo ratings, when `t2rag judge` ran), generation (parse rates,
prediction sources, tokens and time per method), outcomes (why each answer is right or wrong), oracle_gap (each
method's gap to the oracle, split into retrieval and reading), significance (paired tests between every two
methods), table5 (the corpus-size ablation as numbers: MRR@3 mean and standard deviation per corpus size; Figure 4
is its plot), each as .md and .csv, plus the plots, headline.md (what to read first, as `t2rag report` prints it)
and report.md which gathers them all.
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.errors import InputError
from t2rag.estimate.plan_vs_run import plan_table
from t2rag.judge.ratings import ratings_table
from t2rag.methods import METHODS, PAPER_METHODS, ROUTERS
from t2rag.metrics.retrieval import per_query
from t2rag.plugins import label
from t2rag.reference import (
    PaperReference,
    compare_with_paper,
    corpus_size_trend,
    load_paper,
    setting_differences,
)
from t2rag.results.findings import (
    attributed,
    difference_rows,
    differences,
    gap_table,
    headline,
    number_match_plot,
    outcome_table,
)
from t2rag.results.plots import plot_rank_curves
from t2rag.results.significance import ALL_SUBSETS, compare
from t2rag.results.tables import markdown_table, method_columns
from t2rag.retrieval.config import INGREDIENTS, ablation_ladder
from t2rag.run_folder.files import (
    MANIFEST_FILE,
    RATINGS_FILE,
    read_json,
    read_manifest,
    read_records,
    read_result,
    report_dir,
)
from t2rag.run_folder.scorecards import (
    DEFAULT_RETRIEVAL_METRICS,
    ERROR_COUNTS,
    NM_INTERVAL,
    generation_usage,
    interval_key,
    ordered_subsets,
    scorecards_of,
)
from t2rag.storage import join, read_bytes, write_bytes


def ordered_methods(methods: list[str]) -> list[str]:
    """The paper's methods in its order, then the other registered ones in the registry's, then any others as given:
    the same order whatever order the records were read in (which pairs a report tests, and which way round)."""
    paper = [m for m in PAPER_METHODS if m in methods]
    registered = [m for m in METHODS if m in methods and m not in paper]
    return paper + registered + [m for m in methods if m not in paper and m not in registered]


#: Table 3's column names for the metric keys.
TABLE3_LABELS = {"number_match": "NM", NM_INTERVAL: "NM 95% CI", "mrr@3": "MRR@3"}


def table3(scorecards: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    """Number Match with its 95% interval and MRR@3, per subset and weighted, one row per method."""
    ordered = {m: scorecards[m] for m in ordered_methods(list(scorecards))}
    return method_columns(ordered, ["number_match", "mrr@3"], TABLE3_LABELS)


#: The ranks the retrieval curves run over (the paper reports k = 1..10 at most).
CURVE_KS = tuple(range(1, 11))


def rank_curves(records: pa.Table) -> tuple[list[int], dict[str, dict[str, list[float | None]]]]:
    """MRR@k and Recall@k in percent for k = 1..10, per retrieving method over all its questions; None for a k
    beyond the method's lists (a reranker returns its candidate_factor x k candidates). The lists' lengths come from
    `context_ids`, or from a `depth` column where the lists were not read."""
    ranked = records.filter(pc.is_valid(records.column("gold_rank")))
    curves: dict[str, dict[str, list[float | None]]] = {}
    for method in ordered_methods(list(dict.fromkeys(ranked.column("method").to_pylist()))):
        part = ranked.filter(pc.equal(ranked.column("method"), method))
        lengths = (
            part.column("depth") if "depth" in part.column_names else pc.list_value_length(part.column("context_ids"))
        )
        depth = int(pc.max(lengths).as_py() or 0)
        ranks = part.column("gold_rank").to_numpy()
        curves[method] = {
            name: [round(100 * float(per_query(f"{name}@{k}", ranks).mean()), 2) if k <= depth else None
                   for k in CURVE_KS]
            for name in ("mrr", "recall")
        }  # fmt: skip
    return list(CURVE_KS), curves


def curves_table(
    ks: list[int], curves: dict[str, dict[str, list[float | None]]]
) -> tuple[list[str], list[list[object]]]:
    header = ["method", "metric", *(f"k={k}" for k in ks)]
    rows = [[m, name, *c[key]] for m, c in curves.items() for key, name in (("mrr", "MRR@k"), ("recall", "Recall@k"))]
    return header, rows


def setting_lines(manifest: dict | None) -> list[str]:
    """What the run was evaluated on, as markdown lines: corpus per subset, embedder, generator, k."""
    if manifest is None:
        return [f"The run has no {MANIFEST_FILE}: its setting is unknown."]
    config, data = manifest.get("config") or {}, manifest.get("data")
    lines = []
    if data:
        lines.append(
            f"- data: {data['source']}" + (", subsets pooled into one corpus" if data["pooled_corpus"] else "")
        )
        for name, d in data["subsets"].items():
            lines.append(
                f"- {name}: split(s) {', '.join(d['splits']) or '?'}; {d['questions']:,} questions searched against "
                f"{d['contexts']:,} contexts"
            )
    retrieval = config.get("retrieval") or {}
    lines.append(f"- retrieval: k = {retrieval.get('k')}, embedder {(retrieval.get('embedder') or {}).get('model')}")
    generator = config.get("generator")
    lines.append(
        f"- generator: {generator['name']} ({generator['engine']}, {generator['model']})"
        if generator
        else "- no generator"
    )
    if config.get("limit"):
        lines.append(f"- answers generated for a seeded sample of {config['limit']} questions per subset")
    for kind, entries in (manifest.get("plugins") or {}).items():
        made = ", ".join(f"{name} ({label(e['source'], e['version'])})" for name, e in entries.items())
        lines.append(f"- plugin {kind}: {made}")
    return lines


def figure4_table(corpus: tuple[list[str], list[list[object]]], paper: PaperReference):
    """Per (subset, method) of a corpus-size ablation: MRR@3 at its smallest and largest corpus, the run's trend
    and the paper's (Figure 4)."""
    header, rows = corpus
    col = {h: i for i, h in enumerate(header)}
    if not {"subset", "method", "documents", "mrr3_mean"} <= set(col):
        return [], []
    cells: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for r in rows:
        cells.setdefault((r[col["subset"]], r[col["method"]]), []).append((r[col["documents"]], r[col["mrr3_mean"]]))
    out_header = ["subset", "method", "smallest corpus", "MRR@3 there", "largest corpus", "MRR@3 there", "run",
                  "paper"]  # fmt: skip
    out = []
    for (subset, method), points in cells.items():
        points.sort()
        trend = corpus_size_trend(points)
        out.append([subset, method, int(points[0][0]), points[0][1], int(points[-1][0]), points[-1][1], trend,
                    paper.figure4.trend])  # fmt: skip
    return out_header, out


def retrieval_table(scorecards: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    header = ["method", "subset", "questions", *DEFAULT_RETRIEVAL_METRICS]
    rows = []
    for method in ordered_methods(list(scorecards)):
        s = scorecards[method]
        if "mrr@3" not in s["weighted"]:
            continue
        for name, entry in [*s["subsets"].items(), ("W. Avg", s["weighted"])]:
            rows.append([method, name, entry.get("retrieved"), *(entry.get(m) for m in DEFAULT_RETRIEVAL_METRICS)])
    return header, rows


#: The retrieval ablation: each registered retriever with the ingredients it combines (`ablation_ladder`), from plain
#: BM25 to everything fused.
ABLATION_METRICS = ("mrr@3", "recall@1", "recall@3", "recall@5")


def ablation_table(scorecards: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    """Each ladder method that ran, its components on (x) or off, and its retrieval metrics per subset and
    weighted; empty unless a ladder method beyond the paper's ran."""
    ladder = ablation_ladder()
    ran = [m for m in ladder if m in scorecards and "mrr@3" in scorecards[m]["weighted"]]
    if not any(m not in PAPER_METHODS and m != "bm25" for m in ran):
        return [], []
    header, rows = method_columns({m: scorecards[m] for m in ran}, ABLATION_METRICS)
    marks = {m: ["x" if c in ladder[m] else "" for c in INGREDIENTS] for m in ran}
    return ["method", *INGREDIENTS, *header[1:]], [[r[0], *marks[r[0]], *r[1:]] for r in rows]


#: The family's answer yardsticks per method and subset: (column label, scorecard key).
YARDSTICK_COLUMNS = (
    ("generated", "generated"),
    ("NM", "number_match"),
    ("NM 95% CI", NM_INTERVAL),
    ("EM", "em"),
    ("EM 95% CI", interval_key("em")),
    ("F1", "f1"),
    ("exe_acc", "exe_acc"),
    ("exe_acc 95% CI", interval_key("exe_acc")),
    ("program_acc", "program_acc"),
    ("with a gold program", "program_scored"),
    ("EM scored", "em_scored"),
    *((f"{kind} errors", key) for kind, key in ERROR_COUNTS.items()),
    ("% undecided", "percent_undecided"),
    ("EM if %", "em_if_percent"),
)


def yardstick_table(scorecards: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    """Per method that answered, per subset and weighted: Number Match beside TAT-QA's EM and F1 and FinQA's
    execution accuracy, with the EM misses a change of scale or sign would mend."""
    rows = []
    for method in ordered_methods(list(scorecards)):
        s = scorecards[method]
        if "number_match" not in s["weighted"]:
            continue
        for name, entry in [*s["subsets"].items(), ("W. Avg", s["weighted"])]:
            rows.append([method, name, *(entry.get(key) for _, key in YARDSTICK_COLUMNS)])
    return ["method", "subset", *(label for label, _ in YARDSTICK_COLUMNS)], rows


def routing_table(scorecards: dict[str, dict], records: pa.Table) -> tuple[list[str], list[list[object]]]:
    """Each retriever that ran routed (METHOD@ROUTER) beside itself searching each subset's own corpus and the
    pooled corpus unrouted: routing accuracy and NDCG@3, retrieval and answers, over all subsets (weighted); the
    MRR@3 change against the own-subset search is paired over the questions both ranked (the LLM router ranks the
    generation sample only)."""
    header = ["method", "search", "routing acc", "routing acc 95% CI", "routing NDCG@3", "MRR@3", "R@3",
              "MRR@3 vs own subset (same questions)", "NM", "answered"]  # fmt: skip
    rows = []
    bases = dict.fromkeys(m.partition("@")[0] for m in scorecards if "@" in m)
    for base in bases:
        for router in ("", *ROUTERS):
            name = f"{base}@{router}" if router else base
            if name not in scorecards:
                continue
            w = scorecards[name]["weighted"]
            search = "own subset" if not router else "pooled, unrouted" if router == "pooled" else f"{router} router"
            paired = compare(records, name, records, base, ["mrr@3"]) if base in scorecards else []
            gain = next((round(d.diff, 2) for d in paired if d.subset == ALL_SUBSETS), None)
            rows.append([name, search, w.get("routing_acc"), w.get(interval_key("routing_acc")),
                         w.get("routing_ndcg3"), w.get("mrr@3"), w.get("recall@3"), gain, w.get("number_match"),
                         w.get("generated")])  # fmt: skip
    return header, rows


ROUTING_NOTE = (
    "Query routing (mmRAG, section 5): a router ranks the loaded subsets for each question and the method searches "
    "the top one (`routing.top`); `pooled, unrouted` searches every subset's contexts together. Routing accuracy: "
    "the top subset is the question's own; NDCG@3: the rank of the question's subset, binary relevance. Over all "
    "subsets, weighted by questions; the LLM router runs on the generation sample only.\n\n"
)


def yardstick_note(scorecards: dict[str, dict]) -> str:
    """What each yardstick is, and why EM and F1 are missing where they are."""
    note = (
        "NM: the paper's Number Match. EM and F1: TAT-QA's exact match and numeracy-focused F1 (Zhu et al. 2021, "
        "section 4.2: DROP's metrics with the sign kept and a number right only at its scale) against each "
        "question's original answer. exe_acc: FinQA's execution accuracy (Chen et al. 2021, section 3: the value "
        "equals the gold executed value at 5 decimals); program_acc: FinQA's program accuracy (the model's formula "
        "is the gold program's computation, arguments read as symbols), only over the answers whose question has a "
        "gold program (the count beside it; none where the source has no `program` column). scale / sign / "
        "scale_sign errors: EM misses that a power of ten, a sign, or both would mend (TAT-QA's Table 6 kinds a "
        "record can tell), which Number Match forgives. TAT-DQA's release dropped TAT-QA's scale column: a gold "
        "that is a bare number is read in percent points where its question asks for a percentage "
        "(t2rag.metrics.percent_rule), as TAT-QA's scale would; % undecided counts the answers whose question the "
        "rule cannot read (scored with the gold as written), and EM if % is EM with those read in percent points "
        "(empty: none).\n"
    )
    missing = [m for m, s in scorecards.items() if "number_match" in s["weighted"] and "em" not in s["weighted"]]
    if missing:
        note += (
            f"\nNo EM or F1 for {', '.join(missing)}: none of its answered questions has an original answer (the "
            "source has no `original_answer` column, or the records predate these yardsticks: `t2rag score` "
            "recomputes them from a predictions file).\n"
        )
    return note + "\n"


def generation_table(records: pa.Table) -> tuple[list[str], list[list[object]]]:
    header = [
        "method",
        "subset",
        "generated",
        "JSON parsed %",
        "formula evaluable %",
        "from formula %",
        "from computed %",
        "no prediction %",
        "errors",
        "prompt tokens (mean)",
        "completion tokens (mean)",
        "seconds (mean)",
        "prompt tokens",
        "cached prompt tokens",
        "cached %",
    ]
    rows = []
    generated = records.filter(pc.is_valid(records.column("raw_output")))
    usage = generation_usage(generated)
    for method, subset in _method_subsets(generated):
        part = generated.filter(pc.equal(generated.column("method"), method))
        if subset != "all":
            part = part.filter(pc.equal(part.column("subset"), subset))
        n = part.num_rows
        source = part.column("prediction_source").to_pylist()
        cells = usage.get(method, {})
        tokens = cells.get("all", {}) if subset == "all" else cells.get("subsets", {}).get(subset, {})
        rows.append(
            [
                method,
                subset,
                n,
                _pct(part.column("json_ok").to_pylist()),
                _pct(part.column("formula_ok").to_pylist()),
                _pct([s == "formula" for s in source]),
                _pct([s == "computed" for s in source]),
                _pct([s in (None, "none") for s in source]),
                sum(e is not None for e in part.column("generation_error").to_pylist()),
                _mean(part, "prompt_tokens"),
                _mean(part, "completion_tokens"),
                _mean(part, "generation_s"),
                tokens.get("prompt_tokens"),
                tokens.get("cached_prompt_tokens"),
                tokens.get("cached_share"),
            ]
        )
    return header, rows


def _method_subsets(generated: pa.Table) -> list[tuple[str, str]]:
    """(method, subset) for every subset a method generated on, then (method, "all") when it has several."""
    out = []
    for method in ordered_methods(list(dict.fromkeys(generated.column("method").to_pylist()))):
        part = generated.filter(pc.equal(generated.column("method"), method))
        subsets = ordered_subsets(pc.unique(part.column("subset")).to_pylist())
        out += [(method, s) for s in subsets] + ([(method, "all")] if len(subsets) > 1 else [])
    return out


def _pct(flags: list) -> float:
    return round(100 * sum(bool(v) for v in flags) / len(flags), 2) if flags else math.nan


def _mean(table: pa.Table, column: str) -> float:
    values = [v for v in table.column(column).to_pylist() if v is not None]
    return round(float(np.mean(values)), 2) if values else math.nan


def _csv(header: list[str], rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in r] for r in rows)
    return buf.getvalue().encode()


def _read_csv(path: str) -> tuple[list[str], list[list[object]]] | None:
    data = read_bytes(path)
    if data is None:
        return None
    reader = list(csv.reader(io.StringIO(data.decode())))
    return reader[0], [[_num(v) for v in row] for row in reader[1:]]


def _num(value: str) -> object:
    try:
        return float(value) if "." in value or "e" in value.lower() else int(value)
    except ValueError:
        return value


def comparison_note(differences: list[str]) -> str:
    """The words above the comparison: how the run's setting differs, and what the weighted row is."""
    note = (
        "**This run's setting differs from the paper's**, so the differences below are not a reproduction gap:\n"
        + "".join(f"- {d}\n" for d in differences)
        if differences
        else "The run's setting is the paper's.\n"
    )
    return note + (
        "\nNumber Match and MRR@3 come from the paper's Table 3 (one column per generator), Recall@1 and Recall@3 "
        "from its Table 5 (one table for both generators). The paper's printed W. Avg covers four subsets, "
        "VQAonBD included, which the hub's release dropped: the paper's values in the W. Avg row are recomputed "
        "over this run's subsets, from the paper's per-subset values weighted by the paper's question counts "
        "(Table 2).\n\n"
    )


OUTCOME_NOTE = (
    "One outcome per answered record, the first that holds: correct (Number Match); gold_not_read (wrong, and the "
    "gold context was not among the contexts the generator read); formula_error (a formula was given that does not "
    "evaluate); no_answer (no number could be read, or the model said the excerpts lack it); wrong_number.\n\n"
)

GAP_NOTE = (
    "Over the questions both the method and the oracle answered: lost to retrieval = the oracle right and the "
    "method did not read the gold context; lost to reading = the oracle right, the gold read, the method wrong; "
    "gained = the oracle wrong, the method right. gap = lost to retrieval + lost to reading - gained.\n\n"
)

SIGNIFICANCE_NOTE = (
    "Over the questions both methods scored. Number Match, EM, exe_acc and Recall@3: McNemar's exact test; F1 and "
    "MRR@3: a paired "
    "randomization test (10,000 sign flips). The interval is the 95% interval of the mean per-question "
    "difference. 'holds' applies Holm's correction over the pairs of one metric and subset row.\n\n"
)

JUDGE_NOTE = (
    "`t2rag judge`: the judge compares each method's answer with the baseline's to the same question, in both "
    "orders unless asked once, and says which is more accurate; a win scores 1, a tie 0.5. Elo updates each method "
    "against the baseline fixed at 1000 (TableQuest's framework); the interval resamples questions. Unparsed "
    "verdicts (naming neither answer) are no game. NM agreement and Cohen's kappa: over the parsed verdicts where "
    "both answers have Number Match, whose preference is the right answer when exactly one is right, else a tie.\n\n"
)


def write_report(run_dir: str, out_dir: str | None = None, paper_file: str | None = None) -> dict[str, str]:
    """Write every table and plot the run's files allow; returns {name: path}. `paper_file` replaces the packaged
    paper reference (same layout)."""
    records = read_records(run_dir)
    if records.num_rows == 0:
        raise InputError(f"{run_dir}: no records found under {run_dir}/records")
    out_dir = out_dir or report_dir(run_dir)
    scorecards = scorecards_of(records, DEFAULT_RETRIEVAL_METRICS)
    manifest = read_manifest(run_dir)
    records = attributed(records, manifest)
    methods = ordered_methods(list(scorecards))
    paper = load_paper(paper_file)
    written: dict[str, str] = {}
    sections: list[str] = [
        f"# Report for {run_dir}\n",
        f"{records.num_rows} records, methods: {', '.join(scorecards)}\n",
        "## Setting\n\n" + "\n".join(setting_lines(manifest)) + "\n",
    ]

    def emit(
        name: str, title: str, header: list[str], rows: list[list[object]], note: str = "", note_in_file=False
    ) -> None:
        if not rows:
            return
        md = markdown_table(header, rows)
        text = f"{note}{md}\n" if note_in_file else f"{md}\n"
        written[name] = write_bytes(join(out_dir, f"{name}.md"), text.encode())
        write_bytes(join(out_dir, f"{name}.csv"), _csv(header, rows))
        sections.append(f"## {title}\n\n{note}{md}\n")

    def image(name: str, file: str, png: bytes, caption: str) -> None:
        written[name] = write_bytes(join(out_dir, file), png)
        sections.append(f"![{caption}]({file})\n")

    emit("table3", "Table 3: Number Match (NM, with its 95% Wilson interval) and MRR@3", *table3(scorecards))
    setting_diffs = setting_differences(paper, (manifest or {}).get("config") or {}, (manifest or {}).get("data"))
    emit(
        "paper_comparison",
        f"The paper beside this run (Tables 3 and 5; source: {paper.cite()})",
        *compare_with_paper(paper, {m: scorecards[m] for m in methods}),
        note=comparison_note(setting_diffs),
        note_in_file=True,
    )
    emit("retrieval", "Retrieval metrics", *retrieval_table(scorecards))
    ks, curves = rank_curves(records)
    if curves:
        emit("retrieval_curves", "MRR@k and Recall@k, all questions", *curves_table(ks, curves))
        image("retrieval_curves_plot", "retrieval_curves.png", plot_rank_curves(curves, ks), "MRR@k and Recall@k")
    emit("retrieval_ablation", "Retrieval ablation: components on (x) and off", *ablation_table(scorecards))
    emit("routing", "Query routing: each subset's corpus, the pooled corpus, and routed search",
         *routing_table(scorecards, records), note=ROUTING_NOTE, note_in_file=True)  # fmt: skip
    emit("answers", "Answers by every yardstick of the family (percent; errors are counts)",
         *yardstick_table(scorecards), note=yardstick_note(scorecards), note_in_file=True)  # fmt: skip
    judged = read_json(run_dir, RATINGS_FILE)
    if judged:
        emit("judge", f"A machine judge against {judged['baseline']}: Elo with the baseline at 1000 (judge "
             f"{judged['judge']}, {judged['judge_model']})", *ratings_table(judged), note=JUDGE_NOTE,
             note_in_file=True)  # fmt: skip
    emit("generation", "Generation diagnostics", *generation_table(records))
    checked = (read_result(run_dir) or {}).get("plan_vs_run")
    emit("plan_vs_run", "The plan beside the run (the answers the run started with; rates: "
         f"{(checked or {}).get('rates')})", *plan_table(checked))  # fmt: skip
    emit("outcomes", "Outcomes: why each answer is right or wrong (percent of answered records)",
         *outcome_table(records, methods), note=OUTCOME_NOTE, note_in_file=True)  # fmt: skip
    emit("oracle_gap", "The gap to the oracle: Number Match points lost to retrieval and to reading",
         *gap_table(records, methods), note=GAP_NOTE, note_in_file=True)  # fmt: skip
    found, held = differences(records, methods)
    emit("significance", "Paired differences between methods (a - b in points; Holm at 0.05 per metric and subset)",
         *difference_rows(found, held), note=SIGNIFICANCE_NOTE, note_in_file=True)  # fmt: skip
    corpus = _read_csv(join(run_dir, "ablations", "corpus_size.csv"))
    if corpus:
        emit("table5", "Table 5: MRR@3 by corpus size (mean and standard deviation over seeds)", *corpus)
        emit(
            "figure4", "Figure 4: the trend of MRR@3 as the corpus grows, run and paper", *figure4_table(corpus, paper)
        )
        plot = read_bytes(join(run_dir, "ablations", "corpus_size.png"))
        if plot:
            image("corpus_size_plot", "corpus_size.png", plot, "MRR@3 by corpus size")
    plot = number_match_plot({m: scorecards[m] for m in methods})
    if plot is not None:
        image("number_match_plot", "number_match.png", plot, "Number Match per method")
    first = headline({m: scorecards[m] for m in methods}, records, paper, found, held, dict(written), setting_diffs)
    written["headline"] = write_bytes(join(out_dir, "headline.md"), first.encode())
    sections.insert(3, "## Headline\n\n" + first)
    written["report"] = write_bytes(join(out_dir, "report.md"), "\n".join(sections).encode())
    return written
