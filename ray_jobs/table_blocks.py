"""Ray datasets of in-memory Arrow tables, in blocks of a chosen number of rows."""

from __future__ import annotations

import os
import warnings
from functools import partial, update_wrapper

import pyarrow as pa
from ray.data import Datasource, ReadTask, read_datasource
from ray.data.block import BlockMetadata

# Ray Data hints that a bound above an operator's input count wastes concurrency; for a small input (one block) the
# bound is simply not reached, so the hint is noise.
warnings.filterwarnings(
    "ignore", r"The maximum number of concurrent tasks for '(ReadTableBlocks|MapBatches\(tag\))", UserWarning
)
# Each read task carries its block by design (what `from_arrow` would put in the object store); Ray Data's hint that
# a read function over 1 MiB may spill says nothing new.
warnings.filterwarnings("ignore", r"The serialized size of your read function named '_read_block'", UserWarning)


def input_tasks() -> int | None:
    """How many tasks may read (and tag, `placement.tagger`) input blocks at once.

    On a one-node cluster that declares more logical CPUs than the machine has cores (a local cluster, `local_cpus`):
    the cores. Each task running at once needs a worker process of its own (about 2 s of CPU to start), and Ray Data
    would run one per free logical CPU although no more than the cores can run in parallel. Elsewhere None (Ray
    Data's own choice), so a fast GPU stage downstream is never starved of input. Operators fuse only when their
    bounds are equal, so the read and the tagging map both use this one."""
    import ray

    cores = os.cpu_count() or 1
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    return cores if len(nodes) == 1 and ray.cluster_resources().get("CPU", 0) > cores else None


def dataset_from_table(table: pa.Table, block_rows: int):
    """A Ray dataset of `table` in blocks of `block_rows` rows (the unit of streaming and of resume).

    Not `ray.data.from_arrow`: that one puts every block in the object store and waits for a remote task per block
    to learn its row count and schema before anything else runs (11-19 s for 2,000 blocks on this 2-core machine);
    here the driver knows both, and each read task carries its own block."""
    source = TableBlocks(table, block_rows)
    return read_datasource(source, override_num_blocks=len(source.blocks), concurrency=input_tasks())


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
                _block_reader(_ipc_bytes(block)),
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


def _block_reader(data: bytes):
    # Named after `_read_block`: Ray Data reads the read function's `__name__` to warn about a read task over 1 MiB,
    # and a bare `functools.partial` has none (a block of 512 contexts failed the whole read).
    return update_wrapper(partial(_read_block, data), _read_block)


def _read_block(data: bytes) -> list[pa.Table]:
    return [pa.ipc.open_stream(data).read_all()]
