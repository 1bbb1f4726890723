"""The paper's published numbers (`paper.yaml`) and their comparison with a run.

`compare_with_paper` gives, for every method, subset and metric a run has that the paper reports (Number Match and
MRR@3 from Table 3, Recall@1 and Recall@3 from Table 5), the run's value, the paper's value per generator and the
difference; the weighted row recomputes the paper's average over the run's subsets, because the paper's printed
"W. Avg" includes VQAonBD, which the hub's release dropped. `setting_differences` says in words where the run's
setting (corpus, splits, embedder, generator, k) is not the paper's, so a reader never takes a sample run's number
for a reproduction. `compare_table4` puts an embedder ablation beside the paper's Table 4.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from t2rag.errors import ConfigError

PAPER_FILE = Path(__file__).with_name("paper.yaml")
#: The paper's name for its weighted average over all four of its subsets.
PAPER_WEIGHTED = "W. Avg"
TABLE3_METRICS = ("number_match", "mrr@3")
TABLE4_METRICS = ("recall@1", "recall@5", "mrr@5")
TABLE5_METRICS = ("recall@1", "recall@3")
#: The metrics the comparison shows, and the paper's table each comes from.
COMPARED = {"number_match": "3", "mrr@3": "3", "recall@1": "5", "recall@3": "5"}

Cells = dict[str, dict[str, float | None]]  # subset or "W. Avg" -> metric -> percent (None: "-" in the paper)


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    title: str
    venue: str
    url: str
    arxiv: str


class PaperGenerator(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    checkpoint: str | None  # None: the paper does not say which checkpoint or precision


class Setting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    splits: str
    k: int
    embedder: str
    reranker: str
    generators: dict[str, PaperGenerator]  # this project's preset -> the paper's generator


class SubsetCounts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    questions: int
    contexts: int


class EmbedderRow(BaseModel):
    """One row of Table 4: a weighted average over the paper's four subsets, no per-subset values."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    name: str
    recall_1: float = Field(alias="recall@1")
    recall_5: float = Field(alias="recall@5")
    mrr_5: float = Field(alias="mrr@5")

    def metric(self, name: str) -> float:
        return {"recall@1": self.recall_1, "recall@5": self.recall_5, "mrr@5": self.mrr_5}[name]


class Figure4(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    trend: str


class PaperReference(BaseModel):
    """Everything `paper.yaml` holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: Source
    setting: Setting
    table2: dict[str, SubsetCounts]
    released: list[str]
    methods: dict[str, str]
    table3: dict[str, dict[str, Cells]]  # generator preset -> method -> cells
    table4: dict[str, EmbedderRow]  # model id -> row
    table5: dict[str, Cells]  # method -> cells (one table for both generators)
    figure4: Figure4

    @property
    def corpus(self) -> dict[str, SubsetCounts]:
        """Table 2's counts for the subsets of the hub's current release."""
        return {s: self.table2[s] for s in self.released}

    def cite(self) -> str:
        return f"{self.source.title}, {self.source.venue} ({self.source.url})"

    def value(self, generator: str, method: str, subset: str, metric: str) -> float | None:
        """The paper's value as printed (Table 3 for Number Match and MRR@3, Table 5 for recall), or None where
        the paper has none."""
        cells = self.table3.get(generator, {}) if COMPARED.get(metric) == "3" else self.table5
        return cells.get(method, {}).get(subset, {}).get(metric)

    def weighted(self, generator: str, method: str, subsets: list[str], metric: str) -> float | None:
        """The paper's question-weighted average over `subsets` only, recomputed from its per-subset values and
        Table 2's question counts; None when any of them has no value."""
        values = [self.value(generator, method, s, metric) for s in subsets]
        if not subsets or any(v is None for v in values) or any(s not in self.table2 for s in subsets):
            return None
        weights = [self.table2[s].questions for s in subsets]
        return sum(v * w for v, w in zip(values, weights, strict=True)) / sum(weights)


@cache
def _cached(path: str) -> PaperReference:
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        return PaperReference.model_validate(raw)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable paper reference ({str(exc).splitlines()[0]})") from None


def load_paper(path: str | Path | None = None) -> PaperReference:
    """The paper's numbers (the packaged `paper.yaml`, or another file in its layout)."""
    return _cached(str(path or PAPER_FILE))


def setting_differences(paper: PaperReference, config: dict, data: dict | None) -> list[str]:
    """Where a run's setting differs from the paper's, one phrase each (empty: the paper's setting)."""
    out: list[str] = []
    retrieval = config.get("retrieval") or {}
    k = retrieval.get("k", paper.setting.k)
    if k != paper.setting.k:
        out.append(f"k = {k} (paper: {paper.setting.k})")
    embedder = (retrieval.get("embedder") or {}).get("model")
    if embedder and embedder != paper.setting.embedder:
        out.append(f"embedder {embedder} (paper: {paper.setting.embedder})")
    reranker = (retrieval.get("reranker") or {}).get("model")
    if "reranker" in (config.get("methods") or []) and reranker and reranker != paper.setting.reranker:
        out.append(f"reranker {reranker} (paper: {paper.setting.reranker})")
    out += _generator_difference(paper, config.get("generator") or {})
    if data is None:
        out.append("corpus unknown (the run predates corpus descriptions in its manifest)")
        return out
    subsets = list(data.get("subsets", {}))
    missing = [s for s in paper.table2 if s not in subsets]
    if missing:
        dropped = [s for s in missing if s not in paper.released]
        out.append(
            f"subsets {', '.join(subsets)} (paper: also {', '.join(missing)}"
            + (f"; {', '.join(dropped)} is not in the hub's current release" if dropped else "")
            + ")"
        )
    if data.get("pooled_corpus"):
        out.append("one corpus pooled over subsets (paper: one per subset)")
    if data.get("distractors"):
        out.append(f"distractor contexts from {data['distractors']} (paper: none)")
    for subset, d in data.get("subsets", {}).items():
        counts = paper.corpus.get(subset)
        splits = "+".join(d.get("splits") or ["?"])
        if counts is None:
            out.append(f"{subset} is not a subset of the paper")
        elif (d["questions"], d["contexts"]) != (counts.questions, counts.contexts):
            out.append(
                f"{subset}: {splits} split(s), {d['questions']:,} questions over {d['contexts']:,} contexts "
                f"(paper: all splits, {counts.questions:,} over {counts.contexts:,})"
            )
    return out


def _generator_difference(paper: PaperReference, generator: dict) -> list[str]:
    name = generator.get("name")
    if not name:
        return []
    model = generator.get("model") or name
    theirs = paper.setting.generators.get(name)
    if theirs is None:
        return [f"generator {model} (paper: {', '.join(g.name for g in paper.setting.generators.values())})"]
    if theirs.checkpoint is None:
        return [f"generator {model} (paper: {theirs.name}, checkpoint and precision not stated)"]
    if theirs.checkpoint != model:
        return [f"generator {model} (paper: {theirs.checkpoint})"]
    return []


def weighted_label(subsets: list[str]) -> str:
    """The weighted row's name: which subsets it averages."""
    return f"{PAPER_WEIGHTED} of {', '.join(subsets)}"


def compare_with_paper(paper: PaperReference, scorecards: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    """Rows of (method, subset, metric, paper table, run, then the paper's value and run - paper per paper
    generator) for every method, subset and compared metric the run has. The weighted row averages the run's
    subsets, and its paper values are recomputed over those subsets (`PaperReference.weighted`); the paper's cells
    are None where it has no value."""
    generators = list(paper.setting.generators)
    header = ["method", "subset", "metric", "paper table", "run"]
    for g in generators:
        name = paper.setting.generators[g].name
        header += [f"paper {name}", f"run - paper {name}"]
    rows: list[list[object]] = []
    for method, scorecard in scorecards.items():
        subsets = list(scorecard["subsets"])
        entries = [(s, scorecard["subsets"][s], False) for s in subsets]
        entries.append((weighted_label(subsets), scorecard["weighted"], True))
        for label, entry, is_weighted in entries:
            for metric, table in COMPARED.items():
                value = entry.get(metric)
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                in_paper = method in paper.methods
                row: list[object] = [paper.methods[method] if in_paper else f"{method} (not in the paper)"]
                row += [label, metric, None if not in_paper else f"{table}, recomputed" if is_weighted else table]
                row.append(value)
                for g in generators:
                    theirs = (
                        paper.weighted(g, method, subsets, metric)
                        if is_weighted
                        else paper.value(g, method, label, metric)
                    )
                    theirs = None if theirs is None else round(theirs, 2)
                    row += [theirs, None if theirs is None else round(value - theirs, 2)]
                rows.append(row)
    return header, rows


def compare_table4(
    paper: PaperReference, run_rows: dict[str, dict[str, float]]
) -> tuple[list[str], list[list[object]]]:
    """An embedder ablation's weighted R@1, R@5 and MRR@5 (model id -> metric -> percent) beside the paper's Table 4,
    one row per model of either; a side's cells are None where it has no such model."""
    header = ["model", *(f"run {m}" for m in TABLE4_METRICS), *(f"paper {m}" for m in TABLE4_METRICS)]
    rows = []
    for model in [*run_rows, *(m for m in paper.table4 if m not in run_rows)]:
        ours = run_rows.get(model, {})
        theirs = paper.table4.get(model)
        rows.append(
            [
                f"{model} ({theirs.name})" if theirs else model,
                *(ours.get(m) for m in TABLE4_METRICS),
                *(theirs.metric(m) if theirs else None for m in TABLE4_METRICS),
            ]
        )
    return header, rows


def corpus_size_trend(mrr_by_size: list[tuple[int, float]], tolerance: float = 1.0) -> str:
    """`falls`, `rises` or `flat` (within `tolerance` points) from the smallest corpus to the largest."""
    ordered = sorted(mrr_by_size)
    change = ordered[-1][1] - ordered[0][1]
    return "flat" if abs(change) <= tolerance else ("falls" if change < 0 else "rises")
