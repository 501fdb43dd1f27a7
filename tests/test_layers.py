"""Dependencies point one way: model ← environment ← policies ← experiments (ARCHITECTURE.md)."""

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
)
_MODEL_FORBIDS = (
    "gymnasium",
    "stable_baselines3",
    "sb3_contrib",
    "torch",
    "policies",
    "pvegym.env",
    *_EXPERIMENT_LAYER,
)
FORBIDDEN = {
    "pvegym/sim": _MODEL_FORBIDS,
    # the top-level modules the model itself uses
    "pvegym/config.py": _MODEL_FORBIDS,
    "pvegym/units.py": _MODEL_FORBIDS,
    "pvegym/errors.py": _MODEL_FORBIDS,
    "pvegym/env": ("policies", *_EXPERIMENT_LAYER),
    "policies": _EXPERIMENT_LAYER,
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
    files = sorted((ROOT / "pvegym").rglob("*.py")) + sorted((ROOT / "policies").rglob("*.py"))
    relative = [
        str(f.relative_to(ROOT))
        for f in files
        for node in ast.walk(ast.parse(f.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert not relative, relative
