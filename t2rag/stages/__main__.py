"""`python -m t2rag.stages`: print the table of the stages' declarations (docs/stages.md)."""

from t2rag.stages import column_table

print("# Stages\n")
print("What each stage reads, adds and drops, and the pool it needs on Ray, as the stages declare it (made by")
print("`python -m t2rag.stages`). Rows enter as the plan makes them: id, subset, method, question, context_id (the")
print("gold id), gold_context (generated rows only), reference.\n")
print(column_table(), end="")
