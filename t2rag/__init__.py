"""t2rag: the T2-RAGBench benchmark (retrieval plus numerical reasoning over text and tables) on Ray."""

__version__ = "0.1.0"
