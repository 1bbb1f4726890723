"""Retrieval corpora: the unique contexts (one context = one document) of a subset, or of all subsets pooled."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

from t2rag.data.load import QuestionSet
from t2rag.data.schema import CONTEXT_ONLY

log = logging.getLogger(__name__)

POOLED = "pooled"

#: Per-context metadata a corpus keeps (when its source has them): what metadata-aware retrieval links questions to.
#: They come from the corpus side only, from the first row of each context.
CORPUS_METADATA: tuple[str, ...] = ("company_name", "company_symbol", "report_year", "company_sector")

CORPUS_SCHEMA = pa.schema(
    [
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("subset", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class ContextConflict:
    """A context id that carries more than one text; the first text seen is kept."""

    context_id: str
    variants: int
    question_ids: tuple[str, ...]


@dataclass(frozen=True)
class Corpus:
    """Documents in a fixed order; index i of every retriever refers to `context_ids[i]`."""

    name: str
    context_ids: tuple[str, ...]
    subsets: tuple[str, ...]
    texts: tuple[str, ...]
    conflicts: tuple[ContextConflict, ...] = ()
    #: Metadata column name -> one value per document (None where a document has none); empty when unknown.
    metadata: dict[str, tuple[str | None, ...]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.context_ids)

    @cached_property
    def fingerprint(self) -> str:
        """A content hash: equal fingerprints mean equal documents in equal order."""
        h = hashlib.sha256()
        for cid, text in zip(self.context_ids, self.texts, strict=True):
            h.update(cid.encode())
            h.update(b"\0")
            h.update(text.encode())
            h.update(b"\1")
        return h.hexdigest()[:16]

    @cached_property
    def positions(self) -> dict[str, int]:
        """Position of every context id."""
        return {cid: i for i, cid in enumerate(self.context_ids)}

    def texts_of(self, ids: list[str]) -> list[str]:
        return [self.texts[self.positions[cid]] for cid in ids]

    def to_arrow(self) -> pa.Table:
        return pa.table(
            {"context_id": list(self.context_ids), "subset": list(self.subsets), "text": list(self.texts)},
            schema=CORPUS_SCHEMA,
        )

    def with_texts(self, texts: list[str], name: str | None = None) -> Corpus:
        """The same documents with replaced texts (e.g. summaries)."""
        return Corpus(name or self.name, self.context_ids, self.subsets, tuple(texts), self.conflicts, self.metadata)

    def select(self, indices: list[int], name: str | None = None) -> Corpus:
        """A sub-corpus of the given document positions, in that order."""
        return Corpus(
            name or self.name,
            tuple(self.context_ids[i] for i in indices),
            tuple(self.subsets[i] for i in indices),
            tuple(self.texts[i] for i in indices),
            metadata={key: tuple(values[i] for i in indices) for key, values in self.metadata.items()},
        )

    @cached_property
    def reports(self) -> tuple[str, ...]:
        """The report each context is a page of: its company and report year (metadata `company_name` and
        `report_year`), or the context itself where its metadata names neither."""
        names, years = self.metadata_column("company_name"), self.metadata_column("report_year")
        return tuple(f"{n}|{y}" if n and y else cid for n, y, cid in zip(names, years, self.context_ids, strict=True))

    def metadata_column(self, name: str) -> tuple[str | None, ...]:
        """One metadata value per document (all None when the corpus has no such column)."""
        return self.metadata.get(name, (None,) * len(self))

    def __add__(self, other: Corpus) -> Corpus:
        """This corpus followed by another's documents (metadata missing on either side becomes None)."""
        keys = list(dict.fromkeys([*self.metadata, *other.metadata]))
        return Corpus(
            f"{self.name}+{len(other)}",
            self.context_ids + other.context_ids,
            self.subsets + other.subsets,
            self.texts + other.texts,
            self.conflicts,
            {key: self.metadata_column(key) + other.metadata_column(key) for key in keys},
        )


def build_corpus(questions: QuestionSet, subset: str | None) -> Corpus:
    """Unique contexts by `context_id`, in order of first appearance; `subset=None` pools all subsets."""
    table = questions.table
    if subset is not None:
        table = table.filter(pc.equal(table.column("subset"), subset))
    usable = pc.invert(pc.is_in(table.column("excluded_reason"), pa.array(["empty_context", "empty_context_id"])))
    table = table.filter(pc.fill_null(usable, True))

    first: dict[str, int] = {}
    first_rows: list[int] = []
    texts: list[str] = []
    subsets: list[str] = []
    seen_texts: dict[str, set[str]] = {}
    conflict_qids: dict[str, list[str]] = {}
    for row, (qid, cid, sub, text) in enumerate(
        zip(
            table.column("id").to_pylist(),
            table.column("context_id").to_pylist(),
            table.column("subset").to_pylist(),
            table.column("context").to_pylist(),
            strict=True,
        )
    ):
        if cid not in first:
            first[cid] = len(texts)
            first_rows.append(row)
            texts.append(text)
            subsets.append(sub)
            seen_texts[cid] = {text}
        elif text not in seen_texts[cid]:
            seen_texts[cid].add(text)
            conflict_qids.setdefault(cid, []).append(qid)
    conflicts = tuple(ContextConflict(cid, len(seen_texts[cid]), tuple(qids)) for cid, qids in conflict_qids.items())
    if conflicts:
        log.warning(
            "%d context ids carry different texts (first text kept): %s",
            len(conflicts),
            ", ".join(c.context_id for c in conflicts[:5]),
        )
    metadata = {
        name: tuple(None if v is None else str(v) for v in table.column(name).take(first_rows).to_pylist())
        for name in CORPUS_METADATA
        if name in table.column_names
    }
    metadata = {name: values for name, values in metadata.items() if any(v is not None for v in values)}
    return Corpus(subset or POOLED, tuple(first), tuple(subsets), tuple(texts), conflicts, metadata)


def build_corpora(questions: QuestionSet, pooled: bool = False) -> dict[str, Corpus]:
    """One corpus per subset, or a single pooled corpus under every subset's name."""
    if pooled:
        shared = build_corpus(questions, None)
        return dict.fromkeys(questions.subsets, shared)
    return {name: build_corpus(questions, name) for name in questions.subsets}


def subset_stats(questions: QuestionSet) -> dict[str, dict[str, object]]:
    """Per-subset counts: splits present, questions, unique contexts, excluded question ids and non-numeric reference
    answers; rows that hold a context alone (`CONTEXT_ONLY`) count as contexts, not questions."""
    out: dict[str, dict[str, object]] = {}
    for name in questions.subsets:
        part = questions.subset(name)
        t = part.table
        asked = pc.invert(pc.equal(t.column("excluded_reason").fill_null(""), CONTEXT_ONLY))
        excluded = pc.and_(pc.is_valid(t.column("excluded_reason")), asked)
        corpus = build_corpus(part, name)
        out[name] = {
            "splits": sorted({s for s in t.column("split").to_pylist() if s}),
            "questions": int(pc.sum(asked).as_py() or 0),
            "contexts": len(corpus),
            "excluded": t.column("id").filter(excluded).to_pylist(),
            "non_numeric_answers": int(pc.sum(pc.and_(pc.is_null(t.column("answer_value")), asked)).as_py() or 0),
            "context_conflicts": len(corpus.conflicts),
        }
    return out
