"""A module plugin that registers a retriever under a built-in's name."""

from word_overlap import OverlapSettings, WordOverlap

from t2rag.extend import RetrieverPlugin, register

register("bm25", RetrieverPlugin(WordOverlap, settings=OverlapSettings))
