"""A run around the stages: planning, writing and resuming records, the run lifecycle (claim, lock, finish) and the
single-process runner."""
