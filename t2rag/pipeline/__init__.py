"""A run around the stages: planning, records, the run lifecycle (claim, lock, finish) and the single-process
engine."""
