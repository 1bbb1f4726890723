"""A module plugin whose stage declares no pool."""

import pyarrow as pa

from t2rag.extend import Stage, register


class Poolless(Stage):
    name = "poolless"
    reads = ("question",)
    adds = pa.schema({})

    def __call__(self, batch: pa.Table) -> pa.Table:
        return batch


register("poolless", Poolless)
