"""The import graph of the harness package, and its circles.

Reads every module of ``harness/`` with :mod:`ast` (nothing is imported or run) and draws an arrow from a module to
each harness module it imports, saying where the import sits: ``module`` (runs when the module is imported),
``function`` (inside a function body, runs when called) or ``typing`` (under ``if TYPE_CHECKING``, never runs).
A circle is a strongly connected component of more than one module (or a module importing itself); an import
inside a function still ties the two modules together, so by default every kind counts.

Every module also has a layer (:data:`LAYERS`, the table of docs/ARCHITECTURE.md section 2): a module may import
modules of its own layer and of lower ones. An arrow to a higher layer is *upward* (:func:`upward`), whatever its
kind.

    python scripts/import_graph.py            # the circles and the upward imports, and their counts
    python scripts/import_graph.py --kind module   # only imports that run at import time
    python scripts/import_graph.py --edges    # every arrow, with its kind

The unit test ``tests/unit/test_import_graph.py`` holds the package to zero circles with :func:`circles`, to the
upward imports docs/ARCHITECTURE.md allows with :func:`upward`, and every module to a layer with :func:`unplaced`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("module", "function", "typing")

#: The layers of the harness package, lowest first: (name, the modules and packages in it). A module belongs to the
#: longest entry its dotted name (without ``harness.``) starts with; ``__init__`` names the package itself. Kept
#: in step with docs/ARCHITECTURE.md section 2, which says each one's job (tests/unit/test_import_graph.py checks).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("_version", "errors", "hashing", "atomic", "locks", "logs", "overlap", "resources", "data",
                    "paths", "buildinfo")),
    ("pure cores", ("grading", "patches", "patch_paths", "patch_sections", "preparation.requirements")),
    ("sandbox contents", ("incontainer", "runners")),
    ("inputs", ("inputs",)),
    ("bookkeeping", ("bookkeeping",)),
    ("engine", ("engine",)),
    ("preparation and image cache", ("imagecache", "preparation")),
    ("integrity", ("integrity",)),
    ("results", ("results", "swebench.layout")),
    ("views", ("views",)),
    ("node", ("evaluation", "agents")),
    ("run", ("run",)),
    ("commands", ("__init__", "__main__", "cli", "cliargs", "cliruns", "clioutput", "cluster", "compare",
                  "spec_commands", "instance_commands", "solve_command", "swebench", "swebench.flags",
                  "swebench.options")),
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: str
    line: int


def module_names(package_dir: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, for its ``__init__.py``)."""
    root = package_dir.parent
    names: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module):
    """(node, kind) for every import statement, with the kind of place it sits in."""
    def visit(node: ast.AST, kind: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, kind
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, "function" if kind == "module" else kind)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), "typing")
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                yield from visit(child, kind)
    yield from visit(tree, "module")


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest harness module ``name`` falls in (``harness.x.Y`` -> ``harness.x``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def edges(package_dir: Path) -> list[Edge]:
    modules = module_names(package_dir)
    found: list[Edge] = []
    for source, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, kind in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = source.split(".") if is_package else source.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                # ``from pkg import sub`` names a submodule when one exists, else an attribute of pkg.
                targets = [f"{prefix}.{alias.name}" for alias in node.names]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != source:
                    found.append(Edge(source, resolved, kind, node.lineno))
    return list(dict.fromkeys(found))  # one arrow a statement, however many names it imports


def circles(package_dir: Path, kinds: tuple[str, ...] = ("module", "function", "typing")) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, largest first."""
    graph: dict[str, set[str]] = {name: set() for name in module_names(package_dir)}
    self_loops: set[str] = set()
    for edge in edges(package_dir):
        if edge.kind in kinds:
            graph[edge.source].add(edge.target)
            if edge.source == edge.target:
                self_loops.add(edge.source)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def connect(start: str) -> None:
        # Iterative Tarjan: the graph is small but recursion depth should not depend on it.
        nonlocal counter
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in self_loops:
                    components.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            connect(name)
    return sorted(components, key=lambda c: (-len(c), c))


def layer_of(module: str, package: str, table=LAYERS) -> int | None:
    """The index in ``table`` of the layer ``module`` belongs to (None: in no layer)."""
    relative = "__init__" if module == package else module.removeprefix(package + ".")
    best: tuple[int, int] | None = None   # (length of the entry, layer)
    for number, (_, members) in enumerate(table):
        for entry in members:
            if (relative == entry or relative.startswith(entry + ".")) and (best is None or len(entry) > best[0]):
                best = (len(entry), number)
    return None if best is None else best[1]


def unplaced(package_dir: Path, table=LAYERS) -> list[str]:
    """The modules no layer of ``table`` holds."""
    return [m for m in module_names(package_dir) if layer_of(m, package_dir.name, table) is None]


def upward(package_dir: Path, table=LAYERS) -> list[Edge]:
    """Every arrow from a module to one of a higher layer, in source order (modules in no layer are left out:
    :func:`unplaced` names them)."""
    found = []
    for edge in edges(package_dir):
        source, target = (layer_of(m, package_dir.name, table) for m in (edge.source, edge.target))
        if source is not None and target is not None and target > source:
            found.append(edge)
    return sorted(found, key=lambda e: (e.source, e.line, e.target))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, default=Path(__file__).resolve().parent.parent / "harness")
    parser.add_argument("--kind", action="append", choices=KINDS,
                        help="count only these kinds of import (repeatable; default: all)")
    parser.add_argument("--edges", action="store_true", help="print every arrow with its kind and line")
    args = parser.parse_args(argv)
    kinds = tuple(args.kind or KINDS)
    all_edges = edges(args.package)
    if args.edges:
        for edge in sorted(all_edges, key=lambda e: (e.source, e.target, e.line)):
            print(f"{edge.source} -> {edge.target}  [{edge.kind}, line {edge.line}]")
    counts = {kind: sum(1 for e in all_edges if e.kind == kind) for kind in KINDS}
    print(f"{len(module_names(args.package))} modules; imports: "
          + ", ".join(f"{counts[k]} {k}-level" for k in KINDS))
    found = circles(args.package, kinds)
    arrows = [e for e in all_edges if e.kind in kinds]
    for number, component in enumerate(found, 1):
        members = set(component)
        print(f"circle {number} ({len(component)} modules):")
        for edge in sorted(arrows, key=lambda e: (e.source, e.target, e.line)):
            if edge.source in members and edge.target in members:
                print(f"  {edge.source} -> {edge.target}  [{edge.kind}, line {edge.line}]")
    print(f"circles ({'+'.join(kinds)} imports): {len(found)}")
    names = [name for name, _ in LAYERS]
    for module in unplaced(args.package):
        print(f"in no layer: {module}")
    rising = [e for e in upward(args.package) if e.kind in kinds]
    for edge in rising:
        source, target = (layer_of(m, args.package.name) for m in (edge.source, edge.target))
        assert source is not None and target is not None
        print(f"  upward: {edge.source} -> {edge.target}  [{edge.kind}, line {edge.line}]"
              f"  {names[source]} -> {names[target]}")
    print(f"upward imports ({'+'.join(kinds)} imports): {len(rising)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
