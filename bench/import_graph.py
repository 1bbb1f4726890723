"""The project's import graph: circles between modules, and imports that climb from a lower layer to a higher one.

    python bench/import_graph.py [--root CHECKOUT] [--json]

Every `import` and `from ... import` of a project module in t2rag/, ray_jobs/ and serve/ is an edge, at module level
or inside a function (a deferred import still ties the two modules together). A circle is a strongly connected
set of two or more modules; a package circle is one between t2rag's subpackages and root modules, each taken as
one unit (`t2rag.pipeline` importing `t2rag.results` and `t2rag.results` importing `t2rag.pipeline` is one, whichever
modules the edges join). Layers, lowest first (a module may import from its own layer and those below):

0 foundations: errors, storage (and JSON lines), progress (and timing a call), pools (a pool's shape), model_loads,
  model_access, quiet, tokenize, plugins (the loader and who registered what)
1 data and text: data, answer, metrics, reference, routing
2 engines: generation, retrieval
3 run settings, corpus-side steps and the run folder: prompts, methods, config, summaries, the judge's settings,
  verdicts and ratings, run_folder (a run's files, its records, outcomes and scorecards), estimate.rates
4 the per-process hub: resources
5 stages (and the work a run has left, stages.work), extend (the plugins' interface)
6 the estimate, the run and what is made of it: estimate, pipeline, fusion_fit, config_reference, results (report,
  findings, compare, export, scoring, significance, plots, tables, explore), judge
7 front ends: ray_jobs, serve
8 the command line: cli (the one `t2rag` command dispatches to every front end)
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("t2rag", "ray_jobs", "serve")
LAYERS: list[tuple[str, ...]] = [
    ("t2rag.errors", "t2rag.storage", "t2rag.progress", "t2rag.pools", "t2rag.model_loads", "t2rag.model_access",
     "t2rag.quiet", "t2rag.tokenize", "t2rag.plugins"),
    ("t2rag.data", "t2rag.answer", "t2rag.metrics", "t2rag.reference", "t2rag.routing"),
    ("t2rag.generation", "t2rag.retrieval"),
    ("t2rag.prompts", "t2rag.methods", "t2rag.config", "t2rag.summaries", "t2rag.judge.config", "t2rag.judge.verdicts",
     "t2rag.judge.ratings", "t2rag.run_folder", "t2rag.estimate.rates"),
    ("t2rag.resources",),
    ("t2rag.stages", "t2rag.extend"),
    ("t2rag.estimate", "t2rag.pipeline", "t2rag.config_reference", "t2rag.results", "t2rag.judge", "t2rag.sweep"),
    ("ray_jobs", "serve"),
    ("t2rag.cli",),
]  # fmt: skip


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (an imported name that is a submodule counts as that submodule)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def layer(name: str) -> int:
    for rank, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return rank
    return len(LAYERS)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def unit(name: str) -> str:
    """The subpackage or root module of t2rag a module belongs to (`t2rag.results.report` -> `t2rag.results`);
    a front end's modules are their package."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "t2rag" else parts[0]


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph with every module merged into its unit (`unit`), edges inside a unit dropped."""
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        for b in targets:
            if unit(a) != unit(b):
                out.setdefault(unit(a), set()).add(unit(b))
    return out


def analyse(root: Path = ROOT) -> dict:
    modules = project_modules(root)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    climbs = sorted(
        f"{a} (layer {layer(a)}) -> {b} (layer {layer(b)})"
        for a, targets in graph.items()
        for b in targets
        if layer(b) > layer(a)
    )
    unlayered = sorted(name for name in modules if name not in PACKAGES and layer(name) == len(LAYERS))
    lines = {pkg: sum(len(p.read_text().splitlines()) for p in (root / pkg).rglob("*.py")) for pkg in PACKAGES}
    return {"modules": len(modules), "circles": circles(graph), "package_circles": circles(unit_graph(graph)),
            "climbs": climbs, "unlayered": unlayered, "lines": lines}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="a checkout to analyse (default: this one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = analyse(args.root)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['modules']} modules; lines: " + ", ".join(f"{k} {v:,}" for k, v in result["lines"].items()))
    print(f"\n{len(result['circles'])} circle(s):")
    for group in result["circles"]:
        print("  " + " <-> ".join(group))
    print(f"\n{len(result['package_circles'])} package circle(s):")
    for group in result["package_circles"]:
        print("  " + " <-> ".join(group))
    print(f"\n{len(result['climbs'])} upward import(s):")
    for climb in result["climbs"]:
        print("  " + climb)
    if result["unlayered"]:
        print(f"\nin no layer (add them to LAYERS): {', '.join(result['unlayered'])}")


if __name__ == "__main__":
    main()
