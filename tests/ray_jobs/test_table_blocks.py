"""ray_jobs.table_blocks: an in-memory table as read tasks of fixed-size blocks, on the real sample."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from ray_jobs.table_blocks import TableBlocks, dataset_from_table
from tests.conftest import real_table


def _read(source: TableBlocks) -> list[pa.Table]:
    return [block for task in source.get_read_tasks(1) for block in task()]


def test_blocks_hold_the_rows_in_order_with_their_metadata():
    table = real_table("FinQA").slice(0, 50)
    source = TableBlocks(table, 8)
    tasks = source.get_read_tasks(1)
    blocks = _read(source)
    assert [b.num_rows for b in blocks] == [8] * 6 + [2]
    assert [t.metadata.num_rows for t in tasks] == [b.num_rows for b in blocks]
    assert all(t.schema == table.schema for t in tasks)
    assert pa.concat_tables(blocks).equals(table)


def test_a_read_task_carries_its_own_rows_only():
    """A pickled slice of an Arrow table carries the parent's whole buffers; a read task must not."""
    table = real_table("FinQA")
    one_block = pickle.dumps(TableBlocks(table, 4).get_read_tasks(1)[0])
    assert len(pickle.dumps(table.slice(0, 4))) > 0.9 * table.nbytes  # the trap this avoids
    assert len(one_block) < 0.05 * table.nbytes


def test_an_empty_table_is_one_empty_block_and_a_bad_size_is_refused():
    empty = real_table("TAT-DQA").slice(0, 0)
    blocks = _read(TableBlocks(empty, 8))
    assert len(blocks) == 1 and blocks[0].num_rows == 0 and blocks[0].schema == empty.schema
    with pytest.raises(ValueError, match="block_rows"):
        TableBlocks(empty, 0)


def test_blocks_over_a_mebibyte_read_back_through_ray(ray_local):
    """Ray Data treats read tasks over 1 MiB apart (it names their function in a warning): such blocks, as a batch
    of long contexts makes, read back whole."""
    table = real_table("FinQA")
    half = table.num_rows // 2 + 1
    assert table.slice(0, half).nbytes > 2**20
    read = pa.concat_tables(ray_local.get(dataset_from_table(table, half).to_arrow_refs()))
    assert read.sort_by("id").equals(table.sort_by("id"))
