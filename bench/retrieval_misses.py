"""Where a retrieval method's misses go: for every question whose gold context is not ranked first, what was ranked
first instead: another page of the same report (same company, same year), the same company's report of another
year, or elsewhere; and how many golds are outside the top 10. Where the gold page prints the reference answer's
figure (an answer read off the page rather than computed), it counts how often the page ranked first prints it too:
a miss a reader would still answer from.

Usage (a retrieval-only run first; nothing here is fitted):
    t2rag eval --retrieval-only --methods bm25_meta --out runs/misses
    python bench/retrieval_misses.py runs/misses [--method bm25_meta] [--data SOURCE] [--distractors SOURCE]

A run made with `data.distractors` searched each subset's contexts joined by the distractors: pass the same source
as `--distractors` so the pages ranked first are found.
"""

from __future__ import annotations

import argparse
from collections import Counter

import pyarrow.compute as pc

from t2rag.data import build_corpora, load_questions
from t2rag.data.distractors import extend, load_distractors
from t2rag.retrieval.page_evidence.words import figures
from t2rag.run_folder.files import read_records

KINDS = ("another page of the same report", "another year's report of the company", "elsewhere")


def report_of(corpus, position: int) -> tuple[str | None, str | None]:
    """The (company, year) a context comes from, by the corpus's metadata."""
    names, years = corpus.metadata_column("company_name"), corpus.metadata_column("report_year")
    return names[position], years[position]


def prints(text: str, value: float | None) -> bool:
    """Whether a text states a figure equal to the value (sign, thousands separators and a percent's scale aside)."""
    if value is None:
        return False
    printed = {round(float(f), 2) for f in figures(text)}
    return round(abs(value), 2) in printed or round(abs(value) * 100, 2) in printed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run")
    parser.add_argument("--method", default="bm25_meta")
    parser.add_argument("--data", default=None)
    parser.add_argument("--distractors", default=None, help="the run's data.distractors source, if it had one")
    args = parser.parse_args()
    questions = load_questions(args.data)
    corpora = build_corpora(questions)
    if args.distractors:
        distractors = load_distractors(args.distractors)
        corpora = {name: extend(corpus, distractors) for name, corpus in corpora.items()}
    gold_of = dict(zip(questions.table.column("id").to_pylist(), questions.table.column("context_id").to_pylist(),
                       strict=True))  # fmt: skip
    records = read_records(args.run)
    records = records.filter(pc.and_(pc.equal(records.column("method"), args.method),
                                     pc.is_valid(records.column("gold_rank"))))  # fmt: skip
    by_subset: dict[str, Counter] = {}
    for r in records.to_pylist():
        counts = by_subset.setdefault(r["subset"], Counter())
        counts["questions"] += 1
        if r["gold_rank"] == 1:
            continue
        counts["missed"] += 1
        if r["gold_rank"] == 0:
            counts["gold outside the top 10"] += 1
        corpus = corpora[r["subset"]]
        first = report_of(corpus, corpus.positions[r["context_ids"][0]])
        gold = report_of(corpus, corpus.positions[gold_of[r["id"]]])
        same_company = first[0] is not None and first[0] == gold[0]
        kind = KINDS[0] if same_company and first[1] == gold[1] else KINDS[1] if same_company else KINDS[2]
        counts[kind] += 1
        if prints(corpus.texts[corpus.positions[gold_of[r["id"]]]], r["reference"]):
            counts["gold prints the answer"] += 1
            counts["first prints it too"] += prints(corpus.texts[corpus.positions[r["context_ids"][0]]], r["reference"])
    print(f"{args.method}: what was ranked first where the gold was not ({args.run})")
    printed = ("gold outside the top 10", "gold prints the answer", "first prints it too")
    print("| subset | questions | not first | " + " | ".join((*KINDS, *printed)) + " |")
    print("|---|--:|--:|" + "--:|" * (len(KINDS) + len(printed)))
    total = sum(by_subset.values(), Counter())
    for name, c in [*sorted(by_subset.items()), ("all", total)]:
        cells = [c["questions"], c["missed"], *(c[k] for k in (*KINDS, *printed))]
        print(f"| {name} | " + " | ".join(f"{v:,}" for v in cells) + " |")


if __name__ == "__main__":
    main()
