"""`t2rag report RUN_DIR`: paper-shaped tables and plots from a run's records alone.

Writes, under `RUN_DIR/report/`: table3 (Number Match and MRR@3 per subset and weighted, one row per method),
retrieval (every retrieval metric), retrieval_ablation (when methods beyond the paper's ran: the components each
has on, with MRR@3 and Recall@1/3/5 per subset and weighted), generation (parse rates, prediction sources, tokens
and time per method), table4 (the embedder ablation, when it ran), table5 (the corpus-size ablation as numbers:
MRR@3 mean and standard deviation per corpus size; Figure 4 is its plot), each as .md and .csv, plus methods.png,
corpus_size.png and report.md which gathers them.
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2rag.errors import InputError
from t2rag.methods import PAPER_METHODS
from t2rag.metrics.summary import DEFAULT_RETRIEVAL_METRICS
from t2rag.pipeline.records import read_records, summarize_records
from t2rag.plots import plot_methods
from t2rag.storage import join, read_bytes, write_bytes
from t2rag.tables import markdown_table


def _ordered(methods: list[str]) -> list[str]:
    known = [m for m in PAPER_METHODS if m in methods]
    return known + [m for m in methods if m not in known]


def table3(summaries: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    subsets = list(next(iter(summaries.values()))["subsets"]) if summaries else []
    header = ["method"] + [f"{s} {m}" for s in [*subsets, "W. Avg"] for m in ("NM", "MRR@3")]
    rows = []
    for method in _ordered(list(summaries)):
        s = summaries[method]
        row: list[object] = [method]
        for name in [*subsets, "W. Avg"]:
            entry = s["weighted"] if name == "W. Avg" else s["subsets"].get(name, {})
            row += [entry.get("number_match"), entry.get("mrr@3")]
        rows.append(row)
    return header, rows


def retrieval_table(summaries: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    header = ["method", "subset", "questions", *DEFAULT_RETRIEVAL_METRICS]
    rows = []
    for method in _ordered(list(summaries)):
        s = summaries[method]
        if "mrr@3" not in s["weighted"]:
            continue
        for name, entry in [*s["subsets"].items(), ("W. Avg", s["weighted"])]:
            rows.append([method, name, entry.get("retrieved"), *(entry.get(m) for m in DEFAULT_RETRIEVAL_METRICS)])
    return header, rows


#: The retrieval ablation: each method with the components it has on (lexical, numeric tokens, metadata prior,
#: dense, chunked dense), from plain BM25 to everything fused.
ABLATION_LADDER: dict[str, tuple[str, ...]] = {
    "bm25": ("lexical",),
    "bm25_numeric": ("lexical", "numeric"),
    "bm25_meta": ("lexical", "numeric", "metadata"),
    "base": ("dense",),
    "chunked": ("dense", "chunks"),
    "hybrid_bm25": ("lexical", "dense"),
    "hybrid_chunked": ("lexical", "numeric", "dense", "chunks"),
    "hybrid_meta": ("lexical", "numeric", "metadata", "dense", "chunks"),
}
ABLATION_COMPONENTS = ("lexical", "numeric", "metadata", "dense", "chunks")
ABLATION_METRICS = ("mrr@3", "recall@1", "recall@3", "recall@5")


def ablation_table(summaries: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    """Each ladder method that ran, its components on (x) or off, and its retrieval metrics per subset and
    weighted; empty unless a ladder method beyond the paper's ran."""
    ran = [m for m in ABLATION_LADDER if m in summaries and "mrr@3" in summaries[m]["weighted"]]
    if not any(m not in PAPER_METHODS and m != "bm25" for m in ran):
        return [], []
    subsets = list(summaries[ran[0]]["subsets"])
    header = ["method", *ABLATION_COMPONENTS]
    header += [f"{s} {m}" for s in [*subsets, "W. Avg"] for m in ABLATION_METRICS]
    rows = []
    for method in ran:
        row: list[object] = [method, *("x" if c in ABLATION_LADDER[method] else "" for c in ABLATION_COMPONENTS)]
        for name in [*subsets, "W. Avg"]:
            entry = summaries[method]["weighted"] if name == "W. Avg" else summaries[method]["subsets"].get(name, {})
            row += [entry.get(m) for m in ABLATION_METRICS]
        rows.append(row)
    return header, rows


def generation_table(records: pa.Table) -> tuple[list[str], list[list[object]]]:
    header = [
        "method",
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
    ]
    rows = []
    generated = records.filter(pc.is_valid(records.column("raw_output")))
    for method in _ordered(list(dict.fromkeys(generated.column("method").to_pylist()))):
        part = generated.filter(pc.equal(generated.column("method"), method))
        n = part.num_rows
        source = part.column("prediction_source").to_pylist()

        rows.append(
            [
                method,
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
            ]
        )
    return header, rows


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


def write_report(run_dir: str, out_dir: str | None = None) -> dict[str, str]:
    """Write every table and plot the run's files allow; returns {name: path}."""
    records = read_records(run_dir)
    if records.num_rows == 0:
        raise InputError(f"{run_dir}: no records found under {run_dir}/records")
    out_dir = out_dir or join(run_dir, "report")
    summaries = summarize_records(records, DEFAULT_RETRIEVAL_METRICS)
    written: dict[str, str] = {}
    sections: list[str] = [
        f"# Report for {run_dir}\n",
        f"{records.num_rows} records, methods: {', '.join(summaries)}\n",
    ]

    def emit(name: str, title: str, header: list[str], rows: list[list[object]]) -> None:
        if not rows:
            return
        md = markdown_table(header, rows)
        written[name] = write_bytes(join(out_dir, f"{name}.md"), (md + "\n").encode())
        write_bytes(join(out_dir, f"{name}.csv"), _csv(header, rows))
        sections.append(f"## {title}\n\n{md}\n")

    emit("table3", "Table 3: Number Match (NM) and MRR@3 per subset, weighted average", *table3(summaries))
    emit("retrieval", "Retrieval metrics", *retrieval_table(summaries))
    emit("retrieval_ablation", "Retrieval ablation: components on (x) and off", *ablation_table(summaries))
    emit("generation", "Generation diagnostics", *generation_table(records))
    embedders = _read_csv(join(run_dir, "ablations", "embedders.csv"))
    if embedders:
        emit("table4", "Table 4: embedding models, Base-RAG with k = 5", *embedders)
    corpus = _read_csv(join(run_dir, "ablations", "corpus_size.csv"))
    if corpus:
        emit("table5", "Table 5: MRR@3 by corpus size (mean and standard deviation over seeds)", *corpus)
        plot = read_bytes(join(run_dir, "ablations", "corpus_size.png"))
        if plot:
            written["corpus_size_plot"] = write_bytes(join(out_dir, "corpus_size.png"), plot)
            sections.append("![MRR@3 by corpus size](corpus_size.png)\n")
    bars = [
        (m, summaries[m]["weighted"].get("number_match", math.nan), summaries[m]["weighted"].get("mrr@3", math.nan))
        for m in _ordered(list(summaries))
    ]
    written["methods_plot"] = write_bytes(join(out_dir, "methods.png"), plot_methods(bars))
    sections.append("![weighted Number Match and MRR@3 per method](methods.png)\n")
    written["report"] = write_bytes(join(out_dir, "report.md"), "\n".join(sections).encode())
    return written
