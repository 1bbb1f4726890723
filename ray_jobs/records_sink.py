"""Where a Ray run's records go: each block through `write_records`, so a record file is whole or absent.

Ray Data's `write_parquet` writes each file in place, so a worker that dies mid-write leaves a torn file under
`records/` (a later run removes it, but a report read before then fails on it). This sink writes every block as
the single-process runner does: into a temporary file renamed when whole (local disk) or one object that appears
only when its upload completes (S3).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from ray.data import Datasink
from ray.data.block import Block, BlockAccessor

from t2rag.run_folder.files import new_part_name, write_records


class RecordsSink(Datasink):
    def __init__(self, out: str):
        self.out = out

    def write(self, blocks: Iterable[Block], ctx) -> int:
        rows = 0
        for block in blocks:
            table: pa.Table = BlockAccessor.for_block(block).to_arrow()
            if table.num_rows:
                write_records(self.out, table, new_part_name("ray"))
                rows += table.num_rows
        return rows

    def get_name(self) -> str:
        return "t2rag_records"
