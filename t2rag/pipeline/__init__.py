"""Stages of an evaluation and the runners that drive them."""
