"""Token ids made ahead of the model: the same ids as sentence-transformers' own tokenization on every real context,
batches that respect the token budget, and vectors equal to the sentence-transformers path."""

from __future__ import annotations

import numpy as np
import pytest

from t2rag.data import build_corpora
from t2rag.retrieval import Embedder, EmbedderConfig
from t2rag.retrieval.dense.token_batches import CHARS_PER_TOKEN_BOUND, WindowTokenizer, pack, token_batches


def _reference_ids(model, texts: list[str]) -> list[list[int]]:
    """sentence-transformers' own ids, padding removed."""
    features = model.preprocess(texts)
    ids, mask = features["input_ids"].numpy(), features["attention_mask"].numpy()
    return [row[m.astype(bool)].tolist() for row, m in zip(ids, mask, strict=True)]


@pytest.fixture(scope="module")
def contexts(sample) -> list[str]:
    return [text for corpus in build_corpora(sample).values() for text in corpus.texts]


@pytest.mark.parametrize("max_length", [64, 256])
def test_ids_equal_sentence_transformers_on_every_real_context(minilm, contexts, max_length):
    model = minilm.model
    model.max_seq_length = max_length
    try:
        ours = WindowTokenizer(model.tokenizer, max_length)(contexts)
        for start in range(0, len(contexts), 256):
            assert ours[start : start + 256] == _reference_ids(model, contexts[start : start + 256])
    finally:
        model.max_seq_length = 256
    assert max(len(t) for t in contexts) > max_length * CHARS_PER_TOKEN_BOUND  # the cut was exercised


@pytest.mark.parametrize("cut", ["spaces", "offsets"])
def test_a_cut_that_would_change_the_ids_is_not_taken(minilm, cut):
    """Texts whose window ends past the character bound (long whitespace runs, one very long word, a short text)
    are tokenized in full, whichever way the cut is checked."""
    tokenizer = minilm.model.tokenizer
    bound = 16 * CHARS_PER_TOKEN_BOUND
    texts = [
        "revenue " + " " * (2 * bound) + "grew 12% in 2019 " * 40,  # the window's words lie beyond the cut
        "x" * (3 * bound) + " tail",  # one word across the cut
        "net income rose " * 50,  # an ordinary long text: the cut is safe
        "short",
        "a" * (bound - 3) + "     b" + " c" * 40,  # a run of spaces across the bound
        "net  income\n rose\t" * 40,  # mixed whitespace
    ]
    window = WindowTokenizer(tokenizer, 16)
    assert window.cut == "spaces"  # WordPiece ends words at spaces
    window.cut = cut
    full = tokenizer(texts, truncation=True, max_length=16)["input_ids"]
    assert window(texts) == full
    cut_only = tokenizer([t[:bound] for t in texts], truncation=True, max_length=16)["input_ids"]
    assert cut_only[0] != full[0] and cut_only[2] == full[2]  # the check was needed, and the cut was used


def _trained(contexts: list[str], kind: str):
    """A fast tokenizer trained on the real contexts: SentencePiece-like (XLM-R's normalizer and Metaspace, as
    multilingual-e5 has) or byte-level BPE (GPT-2's), wrapped as transformers wraps a hub tokenizer."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    if kind == "metaspace":
        backend = Tokenizer(models.Unigram())
        backend.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
        backend.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=2000, special_tokens=specials, unk_token="<unk>")
    else:
        backend = Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=specials)
    backend.train_from_iterator(contexts[:80], trainer)
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>")


@pytest.mark.parametrize(("kind", "cut"), [("metaspace", "spaces"), ("bytelevel", "offsets")])
def test_other_tokenizer_families_keep_their_ids(contexts, kind, cut):
    """A SentencePiece-like tokenizer is cut before spaces; a byte-level one (whose words carry their leading
    space) is checked through offsets; both give the full texts' ids on every real context, and so does left
    truncation, which is never cut."""
    tokenizer = _trained(contexts, kind)
    window = WindowTokenizer(tokenizer, 128)
    assert window.cut == cut
    texts = [*contexts, "  ".join(contexts[:3]), "x" * 5000]
    assert window(texts) == tokenizer(texts, truncation=True, max_length=128)["input_ids"]
    tokenizer.truncation_side = "left"
    left = WindowTokenizer(tokenizer, 128)
    assert left.cut is None
    assert left(texts[:50]) == tokenizer(texts[:50], truncation=True, max_length=128)["input_ids"]


def test_batches_hold_every_row_once_within_the_budget(minilm, contexts):
    rows = WindowTokenizer(minilm.model.tokenizer, 256)(contexts[:300])
    positions = np.arange(1000, 1300)
    batches = list(pack(rows, positions, tokens_per_batch=2048, pad_id=0, token_types=True))
    seen = np.concatenate([b.rows for b in batches])
    assert sorted(seen.tolist()) == positions.tolist()
    for batch in batches:
        assert batch.input_ids.size <= 2048 or len(batch.rows) == 1
        lengths = batch.attention_mask.sum(axis=1)
        assert lengths.max() == batch.input_ids.shape[1]  # padded only to the batch's longest row
        for row, ids, n in zip(batch.rows, batch.input_ids, lengths, strict=True):
            assert ids[:n].tolist() == rows[row - 1000]
        assert batch.token_type_ids is not None and not batch.token_type_ids.any()
    widths = [b.input_ids.shape[1] for b in batches]
    assert widths == sorted(widths, reverse=True)


def test_the_shared_tokenizer_keeps_its_settings(minilm):
    """The window is set on a copy: the tokenizer the model's own calls use is left as it was."""
    backend = minilm.model.tokenizer.backend_tokenizer
    before = (backend.truncation, backend.padding)
    WindowTokenizer(minilm.model.tokenizer, 16)(["net income rose " * 50])
    assert (backend.truncation, backend.padding) == before


def test_a_slow_tokenizer_is_refused_with_what_to_do():
    class Slow:
        pad_token_id = 0

    with pytest.raises(ValueError, match="tokenize_ahead: false"):
        WindowTokenizer(Slow(), 16)


class _Recording(WindowTokenizer):
    """Notes how many texts each call tokenizes."""

    def __call__(self, texts):
        self.calls = [*getattr(self, "calls", []), len(texts)]
        return super().__call__(texts)


def test_chunks_grow_from_a_small_first_one_and_cover_every_text(minilm, sample):
    """The model starts after 512 texts, not a whole chunk; then chunks double up to chunk_rows."""
    questions = sample.table.column("question").to_pylist()[:1800]
    window = _Recording(minilm.model.tokenizer, 128)
    batches = list(token_batches(window, questions, tokens_per_batch=4096, chunk_rows=1024))
    assert window.calls == [512, 1024, 264]
    assert sorted(np.concatenate([b.rows for b in batches]).tolist()) == list(range(1800))
    small = _Recording(minilm.model.tokenizer, 128)
    assert len(list(token_batches(small, questions[:130], tokens_per_batch=4096, chunk_rows=50))) >= 3
    assert small.calls == [50, 50, 30]


def test_tokenizing_ahead_gives_the_same_vectors_and_rankings(minilm, sample):
    """The path CUDA takes, run on CPU: vectors equal sentence-transformers' to float32 rounding, rankings equal."""
    corpus = build_corpora(sample)["FinQA"]
    texts = corpus.texts[:24]
    questions = sample.subset("FinQA").table.column("question").to_pylist()[:16]
    ahead = Embedder(EmbedderConfig(tokenize_ahead=True, tokens_per_batch=2048))  # several batches
    assert ahead.model is minilm.model  # one model per process
    passages, queries = ahead.embed_passages(texts), ahead.embed_queries(questions)
    reference_passages, reference_queries = minilm.embed_passages(texts), minilm.embed_queries(questions)
    np.testing.assert_allclose(passages, reference_passages, atol=2e-6)
    np.testing.assert_allclose(queries, reference_queries, atol=2e-6)
    ranked = np.argsort(-(queries @ passages.T), axis=1, kind="stable")[:, :10]
    reference = np.argsort(-(reference_queries @ reference_passages.T), axis=1, kind="stable")[:, :10]
    assert (ranked == reference).all()
