"""The unified question schema shared by every subset of T2-RAGBench.

The hub's subsets do not agree on columns (FinQA has 21, TAT-DQA 11) nor on types (`report_year` is int64 in
FinQA and a string in TAT-DQA). Every loaded table is cast to `QUESTION_SCHEMA`: known columns get one type,
columns absent from a subset become null, and unknown extra columns are kept as strings.
"""

from __future__ import annotations

import pyarrow as pa

SUBSETS: tuple[str, ...] = ("FinQA", "ConvFinQA", "TAT-DQA")

#: Columns every source file must have.
REQUIRED_COLUMNS: tuple[str, ...] = (
    "id",
    "context_id",
    "split",
    "question",
    "program_answer",
    "context",
)

#: Optional metadata columns with their unified types.
OPTIONAL_COLUMNS: dict[str, pa.DataType] = {
    "original_answer": pa.string(),  # the answer as the source wrote it; without it, EM and F1 are not computed
    "program": pa.string(),  # FinQA's gold program, where a source has it (program accuracy)
    "table": pa.string(),
    "pre_text": pa.string(),
    "post_text": pa.string(),
    "file_name": pa.string(),
    "company_name": pa.string(),
    "company_symbol": pa.string(),
    "report_year": pa.string(),
    "page_number": pa.int64(),
    "company_sector": pa.string(),
    "company_industry": pa.string(),
    "company_headquarters": pa.string(),
    "company_date_added": pa.timestamp("ms"),
    "company_cik": pa.int64(),
    "company_founded": pa.string(),
}

#: The exclusion reason of a row that holds a context and no question nor answer (a corpus-only source's rows).
CONTEXT_ONLY = "context_only"

#: Columns added by the loader.
DERIVED_FIELDS: tuple[pa.Field, ...] = (
    pa.field("subset", pa.string(), nullable=False),
    pa.field("answer_value", pa.float64()),  # program_answer as a number; null when it is not one
    pa.field("excluded_reason", pa.string()),  # null for scored rows
)

QUESTION_SCHEMA = pa.schema(
    [pa.field("subset", pa.string(), nullable=False)]
    + [pa.field(name, pa.string()) for name in REQUIRED_COLUMNS]
    + [pa.field(name, dtype) for name, dtype in OPTIONAL_COLUMNS.items()]
    + list(DERIVED_FIELDS[1:])
)
