"""The mutation score of the scoring core, per module, from the last `mutmut run` (`make mutation`).

    python bench/mutation_score.py [--min 90] [--json]

Reads mutmut's results (`mutants/**/*.py.meta`: each mutant's exit code under the selected tests) and prints, per
module, the mutants killed (a test failed, or the mutant hung until mutmut's timeout), survived, and not reached
by any selected test, and the score: killed over the mutants that change behaviour. Equivalent mutants (the code
means the same after the change, so no test can tell them apart) are listed with the reason in
`bench/equivalent_mutants.txt` and left out of the score. Exits 1 below `--min`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = Path(__file__).with_name("equivalent_mutants.txt")
KILLED = {1, 3, 24, -24, 36, 152, 255}  # a failing test, or mutmut's timeout (the mutant hangs the tests)
SURVIVED = {0}
UNREACHED = {5, 33}


def equivalent_mutants(path: Path = EQUIVALENT) -> dict[str, str]:
    """Mutant name -> why it cannot change behaviour."""
    out = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition(":")
            out[name.strip()] = why.strip()
    return out


def scores(mutants_dir: Path, equivalent: dict[str, str]) -> dict[str, dict]:
    """Per module: killed, survived, unreached, equivalent, not run, and the score in percent."""
    table = {}
    for meta in sorted(mutants_dir.rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        if not codes:
            continue
        module = str(meta.relative_to(mutants_dir)).removesuffix(".meta")
        counts: Counter[str] = Counter()
        survivors = []
        for name, code in codes.items():
            if name in equivalent:
                counts["equivalent"] += 1
            elif code in KILLED:
                counts["killed"] += 1
            elif code in SURVIVED or code in UNREACHED:
                counts["survived" if code in SURVIVED else "unreached"] += 1
                survivors.append(name)
            else:
                counts["not run" if code is None else "other"] += 1
        changing = counts["killed"] + counts["survived"] + counts["unreached"]
        table[module] = {
            **{k: counts[k] for k in ("killed", "survived", "unreached", "equivalent", "not run", "other")},
            "score": round(100 * counts["killed"] / changing, 1) if changing else None,
            "survivors": sorted(survivors),
        }
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutants", default=str(ROOT / "mutants"))
    parser.add_argument("--min", type=float, default=None, help="exit 1 when the total score is below this")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--survivors", action="store_true", help="list the surviving mutants' names")
    args = parser.parse_args(argv)
    table = scores(Path(args.mutants), equivalent_mutants())
    if not table:
        print(f"no mutmut results under {args.mutants}: run `make mutation`", file=sys.stderr)
        return 2
    total = Counter()
    for row in table.values():
        total.update({k: v for k, v in row.items() if isinstance(v, int)})
    changing = total["killed"] + total["survived"] + total["unreached"]
    overall = round(100 * total["killed"] / changing, 1) if changing else 0.0
    if args.json:
        print(json.dumps({"modules": table, "total": {**total, "score": overall}}))
    else:
        print("| module | killed | survived | unreached | equivalent | score |")
        print("|---|---:|---:|---:|---:|---:|")
        for module, row in table.items():
            print(f"| {module} | {row['killed']} | {row['survived']} | {row['unreached']} | {row['equivalent']} | "
                  f"{row['score']}% |")  # fmt: skip
        print(f"| all | {total['killed']} | {total['survived']} | {total['unreached']} | {total['equivalent']} | "
              f"{overall}% |")  # fmt: skip
        if total["not run"] or total["other"]:
            print(f"({total['not run']} mutants not run yet, {total['other']} with other outcomes)")
        if args.survivors:
            for row in table.values():
                for name in row["survivors"]:
                    print(name)
    return 1 if args.min is not None and overall < args.min else 0


if __name__ == "__main__":
    raise SystemExit(main())
