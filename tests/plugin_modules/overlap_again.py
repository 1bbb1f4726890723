"""A module plugin that registers a retriever under the name another plugin (word_overlap) holds."""

from word_overlap import OverlapSettings, WordOverlap

from t2rag.extend import RetrieverPlugin, register

register("word_overlap", RetrieverPlugin(WordOverlap, settings=OverlapSettings))
