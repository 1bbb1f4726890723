"""Stand-in data with the hub release's counts, for planning and scale runs where the hub is out of reach.

    python bench/release_sized_data.py OUT_DIR

Writes OUT_DIR/data/<Subset>/... in the hub's layout with exactly the release's questions and contexts per subset
(FinQA 8,281 over 2,789, ConvFinQA 3,458 over 1,806, TAT-DQA 11,349 over 2,723; t2rag/reference/paper.yaml), made
of the bundled dev rows: each context is a real dev context (copies get new ids), each question a real dev
question of its context. Lengths and text are real, so token estimates hold; the data is NOT the benchmark:
never report metrics measured on it. ConvFinQA is not bundled: its stand-in is made of FinQA's dev rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from t2rag.reference import load_paper

SAMPLE = Path(__file__).resolve().parents[1] / "t2rag" / "sample" / "data"
#: Which bundled subset each release subset is made of.
MADE_OF = {"FinQA": "FinQA", "ConvFinQA": "FinQA", "TAT-DQA": "TAT-DQA"}


def resized(table: pa.Table, questions: int, contexts: int) -> pa.Table:
    """`questions` rows over `contexts` distinct contexts, cycling through the table's contexts (copies get the
    suffix `~k` on their ids) and their questions, spread as evenly as the rows allow."""
    by_context: dict[str, list[int]] = {}
    for i, cid in enumerate(table.column("context_id").to_pylist()):
        by_context.setdefault(cid, []).append(i)
    order = list(by_context)
    rows, context_ids, ids = [], [], []
    left_q = questions
    for c in range(contexts):
        cid = order[c % len(order)]
        copy = c // len(order)
        take = max(1, round(left_q / (contexts - c))) if c < contexts - 1 else left_q
        for j in range(take):
            row = by_context[cid][j % len(by_context[cid])]
            rows.append(row)
            context_ids.append(f"{cid}~{copy}" if copy else cid)
            ids.append(f"{table.column('id')[row].as_py()}~{copy}.{j // len(by_context[cid])}")
        left_q -= take
    out = table.take(pa.array(rows))
    out = out.set_column(out.schema.get_field_index("context_id"), "context_id", pa.array(context_ids))
    return out.set_column(out.schema.get_field_index("id"), "id", pa.array(ids))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    args = parser.parse_args(argv)
    for subset, counts in load_paper().corpus.items():
        source = pq.read_table(next((SAMPLE / MADE_OF[subset]).rglob("*.parquet")))
        table = resized(source, counts.questions, counts.contexts)
        if MADE_OF[subset] != subset:  # ids stay unique across subsets
            for name in ("id", "context_id"):
                prefixed = pc.binary_join_element_wise(f"{subset}:", table.column(name), "")
                table = table.set_column(table.schema.get_field_index(name), name, prefixed)
        split = "turn_0" if subset == "ConvFinQA" else "stand-in"  # ConvFinQA's one split, as on the hub
        table = table.set_column(table.schema.get_field_index("split"), "split", pa.array([split] * len(table)))
        folder = Path(args.out) / "data" / subset
        path = folder / f"{split}-00000-of-00001.parquet" if subset == "ConvFinQA" else folder / split / "0.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        n_contexts = len(pc.unique(table.column("context_id")))
        print(f"{subset}: {len(table):,} questions over {n_contexts:,} contexts -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
