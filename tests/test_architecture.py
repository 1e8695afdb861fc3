"""The house's walls, read from the source: every ``import`` in src/phaze (at any level, inside functions too;
relative imports resolved) gives the module import graph, and

(a) it has no cycle among phaze modules (module-level or function-level: both are a circle to a reader);
(b) each stage imports only the stages below it: workload, hardware -> cost -> schedule -> placement ->
    search -> report -> api -> cli. ``report`` imports nothing from placement/schedule/search (it formats what
    the stages computed), nothing imports ``cli``, the top-level helpers (errors, units, limits, progress,
    fileio, filefields, jsonable) are importable by all and import no stage, and ``validation`` may import
    the stages it validates.

Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those implicit parent-package edges are not
counted (every module of a package would otherwise be in a circle with its ``__init__``). ``from P import x``
is an edge to the module ``P.x`` when that is a module, else to ``P``.
"""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "phaze"

HELPERS = frozenset({"errors", "units", "limits", "progress", "fileio", "filefields", "jsonable"})
BASE = frozenset({"workload", "hardware", "helpers"})
# The packages (stages) each stage may import. A module's stage: its subpackage under phaze (phaze.cost.gemm:
# cost), "api" for the top-level api*.py, "helpers" for HELPERS, "phaze" for the package's own __init__.
ALLOWED: dict[str, frozenset[str]] = {
    "helpers": frozenset({"helpers"}),
    "workload": frozenset({"workload", "helpers"}),  # the base, with hardware
    "hardware": frozenset({"hardware", "helpers"}),  # workload and hardware import each other nowhere
    "cost": BASE | {"cost"},
    "schedule": BASE | {"cost", "schedule"},
    "placement": BASE | {"cost", "schedule", "placement"},
    "search": BASE | {"cost", "schedule", "placement", "search"},
    "report": BASE | {"cost", "report"},  # formats what the stages computed: no placement/schedule/search
    "validation": BASE | {"cost", "schedule", "placement", "validation"},  # the stages it validates
    "api": BASE | {"cost", "schedule", "placement", "search", "report", "validation", "api"},
    "cli": BASE | {"cost", "schedule", "placement", "search", "report", "validation", "api", "cli"},
    "phaze": frozenset({"api", "helpers"}),  # the package facade re-exports the api
}

# Accepted violations of (b), as (importing module, imported module): none since issue 32's api/report refactor.
# The test fails if an entry no longer exists, so a list added here cannot go stale.
KNOWN_VIOLATIONS: frozenset[tuple[str, str]] = frozenset()
# Accepted import circles (each as the sorted modules of one strongly connected component): none. Exact, like
# KNOWN_VIOLATIONS.
KNOWN_CYCLES: frozenset[tuple[str, ...]] = frozenset()


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The phaze module ``name`` refers to: itself, or the nearest enclosing module (``phaze.x.func``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, source: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The phaze modules ``module`` (its ``source``; ``is_package``: an ``__init__.py``) imports, anywhere."""
    package = module if is_package else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            # `from P import x`: the module P.x if there is one, else P (x is a name defined in P)
            targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in modules else src for a in node.names]
        else:
            continue
        for t in targets:
            if t == "phaze" or t.startswith("phaze."):
                hit = _resolve(t, modules)
                if hit is not None and hit != module:
                    out.add(hit)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {m: imports_of(m, p.read_text(encoding="utf-8"), p.name == "__init__.py", modules)
            for m, p in modules.items()}


def stage(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "phaze"
    head = parts[1]
    if head in HELPERS:
        return "helpers"
    if head == "api" or head.startswith("api_"):
        return "api"
    return head


def cycles(graph: dict[str, set[str]]) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each circle of imports: a strongly connected component of more than one module (Tarjan), as (its
    modules sorted, one concrete cycle through the first of them, a path a reader can follow)."""
    index, low, on, stack, comps = {}, {}, set(), [], []

    def visit(v: str) -> None:  # iterative enough for this graph: depth is at most the module count
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in sorted(comps):
        members, start = set(comp), comp[0]
        # breadth-first from start back to start inside the component: a shortest cycle through it
        prev, frontier, path = {start: None}, [start], None
        while frontier and path is None:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w == start:
                        path = [v]
                        while prev[path[-1]] is not None:
                            path.append(prev[path[-1]])
                        path = path[::-1] + [start]
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if path is not None:
                    break
            frontier = nxt
        out.append((tuple(comp), path))
    return out


def stage_violations(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(m, t) for m, targets in graph.items() for t in targets if stage(t) not in ALLOWED[stage(m)]}


def test_every_module_has_a_known_stage():
    unknown = sorted(m for m in all_modules() if stage(m) not in ALLOWED)
    assert not unknown, f"modules of no stage (add the package to ALLOWED in {Path(__file__).name}): {unknown}"


def test_the_graph_sees_function_level_and_relative_imports():
    graph = import_graph()
    # function-level: reproduce.py imports placement.baseline_plans inside a function
    assert "phaze.placement.baseline_plans" in graph["phaze.search.reproduce"]
    assert "phaze.hardware.area" in graph["phaze.hardware"]  # a package __init__'s own import
    # relative forms (the source uses none today), inside a function, from a module and from a package
    src = "def f():\n    from . import store\n    from .exact import ChipResult\n    from .. import errors\n"
    modules = all_modules()
    assert imports_of("phaze.search.probe", src, False, modules) == {"phaze.search.store", "phaze.search.exact",
                                                                      "phaze.errors"}
    assert imports_of("phaze.search", "from .store import Store\nfrom . import run\n", True, modules) == {
        "phaze.search.store", "phaze.search.run"}


def test_the_checks_find_a_planted_circle_and_a_wrong_way_import():
    g = {"phaze.cost.a": {"phaze.cost.b"}, "phaze.cost.b": {"phaze.cost.c"},
         "phaze.cost.c": {"phaze.cost.a", "phaze.cli"}, "phaze.cli": set(),
         "phaze.report.x": {"phaze.search.y", "phaze.cost.a", "phaze.errors"}, "phaze.search.y": set(),
         "phaze.errors": {"phaze.units"}, "phaze.units": set()}
    assert cycles(g) == [(("phaze.cost.a", "phaze.cost.b", "phaze.cost.c"),
                          ["phaze.cost.a", "phaze.cost.b", "phaze.cost.c", "phaze.cost.a"])]
    assert stage_violations(g) == {("phaze.cost.c", "phaze.cli"), ("phaze.report.x", "phaze.search.y")}


def test_no_import_cycles():
    found = dict(cycles(import_graph()))
    new = [f"{', '.join(comp)}: {' -> '.join(path)}" for comp, path in found.items() if comp not in KNOWN_CYCLES]
    gone = sorted(KNOWN_CYCLES - set(found))
    assert not new and not gone, (
        (f"{len(new)} import circle(s) among phaze modules (its modules: one cycle through them); move the shared "
         f"piece down, or to a small module of its own:\n  " + "\n  ".join(new) if new else "")
        + (f"\nKNOWN_CYCLES entries that no longer exist (delete them): {gone}" if gone else ""))


def test_stages_import_only_the_stages_below_them():
    found = stage_violations(import_graph())
    new = sorted(found - KNOWN_VIOLATIONS)
    gone = sorted(KNOWN_VIOLATIONS - found)
    lines = [f"{m} ({stage(m)}) imports {t} ({stage(t)}); {stage(m)} may import only "
             f"{', '.join(sorted(ALLOWED[stage(m)]))}" for m, t in new]
    assert not new and not gone, (
        (f"{len(new)} import(s) against the stage order:\n  " + "\n  ".join(lines) if new else "")
        + (f"\nKNOWN_VIOLATIONS entries that no longer exist (delete them): {gone}" if gone else ""))
