"""The paper's published numbers (`paper.yaml`) and their comparison with a run.

`compare_table3` gives, for every method and subset a run has, the run's value, the paper's value per generator
and the difference; `setting_differences` says in words where the run's setting (corpus, splits, embedder,
generator, k) is not the paper's, so a reader never takes a sample run's number for a reproduction.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from t2rag.errors import ConfigError

PAPER_FILE = Path(__file__).with_name("paper.yaml")
WEIGHTED = "W. Avg"
TABLE3_METRICS = ("number_match", "mrr@3")


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    title: str
    venue: str
    url: str
    arxiv: str


class Setting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    splits: str
    k: int
    embedder: str
    generators: dict[str, str]


class SubsetCounts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    questions: int
    contexts: int


class Table3(BaseModel):
    """Generator preset -> method -> subset (or "W. Avg") -> metric -> percent."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    transcribed: bool
    values: dict[str, dict[str, dict[str, dict[str, float | None]]]]


class Table4(BaseModel):
    """Embedding model -> subset -> metric -> percent."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    transcribed: bool
    values: dict[str, dict[str, dict[str, float | None]]]


class Figure4(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    trend: str


class PaperReference(BaseModel):
    """Everything `paper.yaml` holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    source: Source
    setting: Setting
    corpus: dict[str, SubsetCounts]
    methods: dict[str, str]
    table3: Table3
    table4: Table4
    figure4: Figure4

    def cite(self) -> str:
        return f"{self.source.title}, {self.source.venue} ({self.source.url})"

    def table3_value(self, generator: str, method: str, subset: str, metric: str) -> float | None:
        """The paper's Table 3 value, or None where the paper has none or it was not transcribed."""
        return self.table3.values.get(generator, {}).get(method, {}).get(subset, {}).get(metric)


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
    generator = config.get("generator") or {}
    name = generator.get("name")
    if name and name not in paper.setting.generators:
        model = generator.get("model") or name
        out.append(f"generator {model} (paper: {', '.join(paper.setting.generators.values())})")
    if data is None:
        out.append("corpus unknown (the run predates corpus descriptions in its manifest)")
        return out
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


def compare_table3(paper: PaperReference, summaries: dict[str, dict]) -> tuple[list[str], list[list[object]]]:
    """Rows of (method, subset, metric, run, then paper value and run - paper per paper generator) for every
    method, subset and Table-3 metric the run has; the paper's cells are None where it has no value."""
    generators = list(paper.setting.generators)
    header = ["method", "subset", "metric", "run"]
    for g in generators:
        name = paper.setting.generators[g]
        header += [f"paper {name}", f"run - paper {name}"]
    rows: list[list[object]] = []
    for method, summary in summaries.items():
        entries = {**summary["subsets"], WEIGHTED: summary["weighted"]}
        for subset, entry in entries.items():
            for metric in TABLE3_METRICS:
                value = entry.get(metric)
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                row: list[object] = [paper.methods.get(method, f"{method} (not in the paper)"), subset, metric, value]
                for g in generators:
                    theirs = paper.table3_value(g, method, subset, metric)
                    row += [theirs, None if theirs is None else round(value - theirs, 2)]
                rows.append(row)
    return header, rows


def corpus_size_trend(mrr_by_size: list[tuple[int, float]], tolerance: float = 1.0) -> str:
    """`falls`, `rises` or `flat` (within `tolerance` points) from the smallest corpus to the largest."""
    ordered = sorted(mrr_by_size)
    change = ordered[-1][1] - ordered[0][1]
    return "flat" if abs(change) <= tolerance else ("falls" if change < 0 else "rises")
