"""Dependencies point one way: model ← environment ← policies ← experiments (ARCHITECTURE.md), and
no two modules import each other, directly or through others."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package prefix -> imports it must never make
_EXPERIMENT_LAYER = (
    "pvegym.commands",
    "pvegym.harness",
    "pvegym.cli",
    "pvegym.experiments",
    "pvegym.tuning",
    "pvegym.learning",
    "pvegym.pve_export",  # reads an operator's export and writes scenario files
)
_MODEL_FORBIDS = (
    "gymnasium",
    "stable_baselines3",
    "sb3_contrib",
    "torch",
    "pvegym.policies",
    "pvegym.env",
    *_EXPERIMENT_LAYER,
)
FORBIDDEN = {
    "pvegym/sim": _MODEL_FORBIDS,
    # the top-level modules the model itself uses
    "pvegym/config.py": _MODEL_FORBIDS,
    "pvegym/units.py": _MODEL_FORBIDS,
    "pvegym/errors.py": _MODEL_FORBIDS,
    "pvegym/limits.py": _MODEL_FORBIDS,
    "pvegym/env": ("pvegym.policies", *_EXPERIMENT_LAYER),
    "pvegym/vector": ("pvegym.policies", *_EXPERIMENT_LAYER),  # the environment layer, batched
    "pvegym/policies": _EXPERIMENT_LAYER,
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_one_way(layer: str) -> None:
    where = ROOT / layer
    files = [where] if where.is_file() else sorted(where.rglob("*.py"))
    assert files, f"no files in {layer}"
    bad = [
        f"{f.relative_to(ROOT)} imports {name}"
        for f in files
        for name in _imports(f)
        if any(name == p or name.startswith(p + ".") for p in FORBIDDEN[layer])
    ]
    assert not bad, bad


def test_no_relative_imports() -> None:
    """The layer check reads absolute module names: a relative import would slip past it."""
    files = sorted((ROOT / "pvegym").rglob("*.py"))
    relative = [
        str(f.relative_to(ROOT))
        for f in files
        for node in ast.walk(ast.parse(f.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert not relative, relative


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports: every import statement, wherever it stands (at
    the top, inside a function, under ``if TYPE_CHECKING``) — a cycle through a lazy or a typing
    import is still a cycle of concepts. ``from pkg import mod`` is an edge to ``pkg.mod``."""
    files = sorted((ROOT / "pvegym").rglob("*.py"))
    modules = {_module_name(f): f for f in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:
                        deps.add(sub)
                    elif node.module in modules:
                        deps.add(node.module)
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert "pvegym.sim.metrics" in graph["pvegym.sim.simulation"]  # the graph sees imports
    assert not cycles(graph), cycles(graph)
