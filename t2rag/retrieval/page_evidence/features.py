"""Page-level evidence: which page of a report a question is about, from what the page's table and text name.

A metadata-aware BM25 finds the right report; what it then gets wrong is which of the report's pages (contexts) the
question is about (`bench/retrieval_misses.py`). The question names line items ("order intake", "accrued wages and
vacation"), periods and figures, and a page's table names its line items in its row labels and its periods in its
header cells (the question's words and years anywhere among those headers, tried as features, added nothing over
the metadata prior's year match on dev; the years of the table holding the row the question names do: `row_years`).
Features per (question, context), all in [0, 1]:

- `row_words`: the share of the question's words (idf-weighted over the corpus's row labels) found among the
  context's table row labels;
- `line_item`: a row label the question names whole, weighted by that label's idf mass and scaled by the question's
  best context (0 where no label is named whole);
- `phrases`: the share of the question's adjacent word pairs (stop words dropped, plurals folded) that the context
  also has;
- `triples`: likewise for runs of three such words ("adjusted operating costs", "accrued wages vacation");
- `numbers`: the share of the question's figures (years excepted) that the context states, matched by value;
- `row_years`: the largest share of a row label's words (idf-weighted) that the question holds, over the labels
  whose table names every year the question names (in its header rows, or else its caption): the table a question
  was written from has its line item as a row and its years as columns, where another page of the report (the
  prior year's comparison) or the company's report of another year has the same row under other years. 0 for a
  question that names no year;
- `passage`: the largest share of the question's distinct words (plurals folded; the words naming its company left
  out, when the caller gives them) that one passage of the context holds, a passage being 24 consecutive content
  words (two adjacent blocks of 12: `t2rag.retrieval.page_evidence.keys.WordBlocks`). The words a question asks
  about sit together on the page it was written from (a table row and its header, one sentence), where another page
  of the same report may name each of them somewhere.

The tables are the contexts' markdown tables as the corpus holds them: TAT-DQA's (a label column, header rows with
an empty label) and FinQA's (pandas markdown with an index column, glued to the line before it). Only the question's
text is read on the question side. The row-label features are sparse incidence products over the labels (a few
dozen terms per context), so a question costs its terms plus one gather over the contexts. Word pairs and figures,
hundreds per context, are kept as each context's sorted 32-bit hashes (4 bytes per pair) and looked up only for the
contexts a first stage chose (`t2rag.retrieval.fusion.weighted`): their cost per question is fixed whatever the corpus's
size, and no index over all pairs is built (it took 4.25 GB at 100,000 contexts; `docs/methods.md`).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from t2rag.retrieval.page_evidence.keys import (
    FIGURES,
    TRIPLES,
    KeySets,
    RowWordCounts,
    TermSets,
    Vocabulary,
    WordBlocks,
    figure_keys,
    hashed_each,
    mix,
    pair_keys,
    triple_keys,
    word_blocks,
)
from t2rag.retrieval.page_evidence.tables import labelled_rows
from t2rag.retrieval.page_evidence.words import (
    content_words,
    figures,
    phrase_words,
    stem,
    word_pairs,
    word_triples,
)
from t2rag.retrieval.years import mask_of, years_named

#: Features of the row labels, scored on every context.
CORPUS_FEATURES: tuple[str, ...] = ("row_words", "line_item")


#: Features of word pairs, figures and the years of the rows a question names, scored on the contexts a first stage
#: chose (`t2rag.retrieval.fusion.weighted`).
CANDIDATE_FEATURES: tuple[str, ...] = ("phrases", "triples", "numbers", "row_years", "passage")


PAGE_FEATURES: tuple[str, ...] = (*CORPUS_FEATURES, *CANDIDATE_FEATURES)


#: bm25_page's page features (`triples` came with bm25_focus).
FIRST_PAGE_FEATURES: tuple[str, ...] = ("row_words", "line_item", "phrases", "numbers")


@dataclass(frozen=True)
class Asked:
    """What page evidence reads of a block of questions: their words (for the row labels), word pairs, runs of
    three words and figures."""

    words: list[list[str]]  # content words, in order
    in_labels: sparse.csr_matrix  # (questions x row-label terms): the words some context's row labels hold
    named: sparse.csr_matrix  # (questions x row labels): the idf mass of each label's words the question names
    pairs: list[np.ndarray]  # sorted distinct hashes of the known word pairs
    pair_counts: np.ndarray  # distinct word pairs of each question, known or not
    triples: list[np.ndarray]  # likewise for runs of three words
    triple_counts: np.ndarray
    figures: list[np.ndarray]  # sorted distinct hashes of the figures
    figure_counts: np.ndarray
    years: np.ndarray  # the years each question names (`year_mask`, uint64)
    passage_words: list[np.ndarray]  # distinct ids of the known words `passage` reads (its company's left out)
    passage_counts: np.ndarray  # distinct words `passage` reads of each question, known or not


class PageEvidence:
    """Fitted once on a corpus's texts. The row-label features (`CORPUS_FEATURES`) score every context through small
    label indexes; the word-pair and figure features (`CANDIDATE_FEATURES`) score the contexts a first stage chose,
    from per-context key sets, so neither the memory nor the cost of those grows with the pairs of every context a
    question's terms reach."""

    def __init__(self, texts: Sequence[str], counts: RowWordCounts | None = None):
        """`counts`: the row-label words of the whole corpus when `texts` are a shard of it, so that the shard
        scores its contexts exactly as the whole corpus's index would."""
        self.n_docs = len(texts)
        self.vocabulary = Vocabulary()  # the row labels' words
        if counts is not None:
            self.vocabulary.add(counts.words)  # the corpus's ids, in its first-seen order
        self.stems = Vocabulary()  # the stemmed words of pairs and triples
        labels: list[list[np.ndarray]] = []
        years: list[list[int]] = []  # each label's table's header years (`year_mask`)
        key_sets, blocks = [], []
        for text in texts:
            rows = labelled_rows(text)
            labels.append([self.vocabulary.add(content_words(label)) for label, _ in rows])
            years.append([mask for _, mask in rows])
            ids = self.stems.add(phrase_words(text))
            kinds = (mix(pair_keys(ids)[0]), mix(triple_keys(ids)[0], TRIPLES), mix(figure_keys(text), FIGURES))
            key_sets.append(np.unique(np.concatenate(kinds)))
            blocks.append(word_blocks(ids))
        self.sets = KeySets(key_sets)  # each context's word pairs, triples and figures, hashed by kind
        self.blocks = WordBlocks(blocks)
        del key_sets, blocks
        self.row_words = TermSets([np.concatenate(ls) if ls else np.zeros(0, np.int64) for ls in labels], counts)
        # Every (context, label) with words, as a row: the label's idf mass (over the row-label vocabulary).
        named = [(d, ids, mask) for d, ls in enumerate(labels) for ids, mask in zip(ls, years[d], strict=True)]
        named = [(d, ids, mask) for d, ids, mask in named if len(ids)]
        self.label_doc = np.array([d for d, _, _ in named], np.int64)
        self.label_years = np.array([mask for _, _, mask in named], np.uint64)
        members = self.row_words.asked([ids for _, ids, _ in named])
        self.label_terms = members.multiply(self.row_words.idf).tocsr()
        self.label_mass = np.asarray(self.label_terms.sum(axis=1)).ravel()

    @property
    def nbytes(self) -> int:
        """Memory held by the index's arrays (the vocabulary's dictionary aside)."""
        labels = self.label_terms.data.nbytes + self.label_terms.indices.nbytes + self.label_terms.indptr.nbytes
        located = self.label_doc.nbytes + self.label_years.nbytes
        return self.sets.nbytes + self.blocks.nbytes + self.row_words.nbytes + labels + located

    def asked(
        self,
        questions: Sequence[str],
        years: Sequence[frozenset[int]] | None = None,
        left_out: Sequence[frozenset[str]] | None = None,
        features: Collection[str] = PAGE_FEATURES,
    ) -> Asked:
        """What the `features` read of the questions (`years`: the years each names, when already read; `left_out`:
        per question, the words `passage` does not read, those naming its company). A candidate feature not named
        reads nothing (its keys are empty)."""
        years = [years_named(q) for q in questions] if years is None else years
        said = [content_words(q) for q in questions]
        words = [[stem(w) for w in ws] for ws in said]
        lengths = [len(w) for w in words]
        ids = self.stems.find([w for ws in words for w in ws])
        row = np.repeat(np.arange(len(questions)), lengths)
        stated = [figures(q) for q in questions]
        values = np.array([float(n) for f in stated for n in f], np.float64)
        value_row = np.repeat(np.arange(len(questions)), [len(f) for f in stated])
        n = len(questions)
        in_labels = self._row_label_words(said)
        none = [np.zeros(0, np.uint32)] * n
        triples = "triples" in features
        return Asked(
            words=said,
            in_labels=in_labels,
            named=(in_labels @ self.label_terms.T).tocsr(),
            pairs=hashed_each(*pair_keys(ids, row), n),
            pair_counts=np.array([len(word_pairs(w)) for w in words], np.float32),
            triples=hashed_each(*triple_keys(ids, row), n, TRIPLES) if triples else none,
            triple_counts=np.array([len(word_triples(w)) for w in words] if triples else [0] * n, np.float32),
            figures=hashed_each(values, value_row, n, FIGURES),
            figure_counts=np.array([len(f) for f in stated], np.float32),
            years=np.array([mask_of(y) for y in years], np.uint64),
            **(passage_words(said, words, ids, row, left_out) if "passage" in features else no_passage(n)),
        )

    def features(self, questions: Sequence[str] | Asked) -> dict[str, np.ndarray]:
        """Each feature of PAGE_FEATURES as a (questions x contexts) float32 matrix, every context scored (the
        questions, or what `asked` read of them)."""
        asked = questions if isinstance(questions, Asked) else self.asked(questions)
        out = {name: values.toarray().astype(np.float32) for name, values in self.corpus_features(asked).items()}
        every = np.broadcast_to(np.arange(self.n_docs), (len(asked.words), self.n_docs))
        out.update(self.candidate_features(asked, every))
        return out

    def corpus_features(self, asked: Asked) -> dict[str, sparse.csr_matrix]:
        """The CORPUS_FEATURES, (questions x contexts) sparse."""
        return {"row_words": self.row_words.share(asked.in_labels), "line_item": self._line_item(asked.named)}

    def candidate_features(
        self, asked: Asked, docs: np.ndarray, names: Sequence[str] = CANDIDATE_FEATURES
    ) -> dict[str, np.ndarray]:
        """The CANDIDATE_FEATURES named (all by default) of the contexts `docs` ((questions x candidates)
        positions), same shape."""
        keyed = {
            "phrases": (asked.pairs, asked.pair_counts),
            "triples": (asked.triples, asked.triple_counts),
            "numbers": (asked.figures, asked.figure_counts),
        }
        looked_up = [name for name in names if name in keyed]
        found = self.sets.found(docs, [keyed[name][0] for name in looked_up]) if looked_up else []
        out = {name: held / np.maximum(keyed[name][1], 1)[:, None] for name, held in zip(looked_up, found, strict=True)}
        if "row_years" in names:
            out["row_years"] = self.row_years(asked, docs)
        if "passage" in names:
            out["passage"] = (
                self.blocks.best_passage(docs, asked.passage_words) / np.maximum(asked.passage_counts, 1)[:, None]
            )
        return out

    def row_years(self, asked: Asked, docs: np.ndarray) -> np.ndarray:
        """The `row_years` feature of the contexts `docs` ((questions x candidates) positions; -1: none), float32.
        It reads the (question, label) matches the line items made (`Asked.named`), keeps those whose table names
        every year asked (a question that names no year keeps none), and places the kept ones of each question's
        candidates through a slot per chosen context: no array spans the questions times the corpus."""
        out = np.zeros(docs.shape, np.float32)
        if not len(self.label_doc) or not asked.years.any():
            return out
        named = asked.named.tocoo()
        years = asked.years[named.row]
        held = (years != 0) & ((years & ~self.label_years[named.col]) == 0)
        row, label, mass = named.row[held], named.col[held], named.data[held]
        # Each chosen context's slot, and each question's candidate rank per slot (-1: not its candidate). Slot
        # len(chosen) stands for every context no question chose; the one after it takes the -1 positions.
        is_chosen = np.zeros(self.n_docs + 1, bool)
        is_chosen[docs] = True
        is_chosen[-1] = False
        chosen = np.flatnonzero(is_chosen)
        slot = np.full(self.n_docs + 1, len(chosen), np.int32)
        slot[chosen] = np.arange(len(chosen), dtype=np.int32)
        slot[-1] = len(chosen) + 1
        column = np.full((len(docs), len(chosen) + 2), -1, np.int32)
        column[np.arange(len(docs))[:, None], slot[docs]] = np.arange(docs.shape[1], dtype=np.int32)
        at = column[row, slot[self.label_doc[label]]]
        kept = at >= 0
        value = (mass[kept] / self.label_mass[label[kept]]).astype(np.float32)
        np.maximum.at(out, (row[kept], at[kept]), value)
        return out

    def _line_item(self, named: sparse.csr_matrix) -> sparse.csr_matrix:
        """(questions x contexts), sparse: the idf mass of the largest row label each context has that the question
        names whole (`named`: `Asked.named`), over the question's best such mass."""
        mass = self.line_item_mass(named).tocoo()
        best = line_item_best(mass)
        scaled = scale_line_item(mass.data, best[mass.row])
        return sparse.csr_matrix((scaled, (mass.row, mass.col)), shape=mass.shape)

    def _row_label_words(self, said: list[list[str]]) -> sparse.csr_matrix:
        """(questions x row-label terms): the questions' words (`said`) that some context's row labels hold."""
        ids = self.vocabulary.find([w for words in said for w in words])
        return self.row_words.asked_flat(ids, np.repeat(np.arange(len(said)), [len(w) for w in said]), len(said))

    def line_item_mass(self, named: sparse.csr_matrix) -> sparse.csr_matrix:
        """(questions x contexts), sparse float32: the idf mass of the largest row label each context has that the
        question names whole, before its scaling by the question's best (`scale_line_item`); `named`: `Asked.named`."""
        n = named.shape[0]
        if not len(self.label_doc):
            return sparse.csr_matrix((n, self.n_docs), dtype=np.float32)
        named = named.tocoo()
        whole = named.data >= self.label_mass[named.col] * (1 - 1e-5)  # float32 sums in another order
        q, label = named.row[whole].astype(np.int64), named.col[whole]
        cells, at = np.unique(q * self.n_docs + self.label_doc[label], return_inverse=True)
        mass = np.zeros(len(cells), np.float32)
        np.maximum.at(mass, at, self.label_mass[label])  # a context's largest label the question names whole
        rows, cols = np.divmod(cells, self.n_docs)
        return sparse.csr_matrix((mass, (rows, cols)), shape=(n, self.n_docs))


def passage_words(
    said: list[list[str]],
    words: list[list[str]],
    ids: np.ndarray,
    row: np.ndarray,
    left_out: Sequence[frozenset[str]] | None,
) -> dict[str, list[np.ndarray] | np.ndarray]:
    """`Asked`'s passage fields: per question, the distinct ids of its known stemmed words (`words`, with their
    `ids` and `row` flat) but those whose word as said is `left_out`, and how many distinct such words it has."""
    left_out = left_out or [frozenset()] * len(said)
    kept = np.fromiter((w not in out for ws, out in zip(said, left_out, strict=True) for w in ws), bool, len(ids))
    distinct = [len({s for s, w in zip(ss, ws, strict=True) if w not in out})
                for ss, ws, out in zip(words, said, left_out, strict=True)]  # fmt: skip
    known = kept & (ids >= 0)
    span = int(ids.max(initial=0)) + 1
    rows, word = np.divmod(np.unique(row[known] * span + ids[known]), span)
    bounds = np.searchsorted(rows, np.arange(len(said) + 1))
    return {
        "passage_words": [word[a:b] for a, b in itertools.pairwise(bounds.tolist())],
        "passage_counts": np.array(distinct, np.float32),
    }


def no_passage(n: int) -> dict[str, list[np.ndarray] | np.ndarray]:
    """`Asked`'s passage fields when `passage` is not read."""
    return {"passage_words": [np.zeros(0, np.int64)] * n, "passage_counts": np.zeros(n, np.float32)}


def line_item_best(mass: sparse.spmatrix) -> np.ndarray:
    """Per question, its best line-item mass over the contexts (float32; 0 where none is named)."""
    cells = mass.tocoo()
    best = np.zeros(mass.shape[0], np.float32)
    np.maximum.at(best, cells.row, cells.data.astype(np.float32))
    return best


def scale_line_item(mass: np.ndarray, best: np.ndarray) -> np.ndarray:
    """The `line_item` feature: a context's mass over its question's best (float32, as every index computes it)."""
    return (mass / np.where(best > 0, best, 1.0).astype(np.float32)).astype(np.float32)
