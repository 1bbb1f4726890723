"""Ray datasets of in-memory Arrow tables, in blocks of a chosen number of rows."""

from __future__ import annotations

from functools import partial

import pyarrow as pa
from ray.data import Datasource, ReadTask, read_datasource
from ray.data.block import BlockMetadata

#: Tasks reading (and tagging, `placement.tagger`) blocks of a table at a time. Each is microseconds of work, but every
#: task running at once needs a worker process of its own (about 2 s of CPU to start); without a bound Ray Data
#: runs one per free logical CPU. Two keep far ahead of any model downstream. Operators fuse only when their bounds
#: are equal, so the tagging map uses the same one.
INPUT_TASKS = 2


def dataset_from_table(table: pa.Table, block_rows: int):
    """A Ray dataset of `table` in blocks of `block_rows` rows (the unit of streaming and of resume).

    Not `ray.data.from_arrow`: that one runs a remote task per block just to learn its row count and schema, before
    anything else runs, which on a small cluster starts a burst of worker processes for every dataset."""
    source = TableBlocks(table, block_rows)
    return read_datasource(source, override_num_blocks=len(source.blocks), concurrency=INPUT_TASKS)


class TableBlocks(Datasource):
    """One read task per block of an in-memory table; each block's metadata is known in the driver."""

    def __init__(self, table: pa.Table, block_rows: int) -> None:
        super().__init__()
        if block_rows < 1:
            raise ValueError(f"block_rows must be at least 1, got {block_rows}")
        starts = range(0, table.num_rows, block_rows) if table.num_rows else [0]
        self.blocks = [table.slice(start, block_rows) for start in starts]

    def estimate_inmemory_data_size(self) -> int:
        return sum(block.nbytes for block in self.blocks)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context=None):
        return [
            ReadTask(
                partial(_read_block, _ipc_bytes(block)),
                BlockMetadata(num_rows=block.num_rows, size_bytes=block.nbytes, input_files=None, exec_stats=None),
                schema=block.schema,
                per_task_row_limit=per_task_row_limit,
            )
            for block in self.blocks
        ]


def _ipc_bytes(table: pa.Table) -> bytes:
    # IPC writes only a slice's own rows; a pickled slice would carry its parent's whole buffers into every task.
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _read_block(data: bytes) -> list[pa.Table]:
    return [pa.ipc.open_stream(data).read_all()]
