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
FORBIDDEN = {
    "pvegym/sim": (
        "gymnasium",
        "stable_baselines3",
        "sb3_contrib",
        "torch",
        "policies",
        "pvegym.env",
        *_EXPERIMENT_LAYER,
    ),
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
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files, f"no files in {layer}"
    bad = [
        f"{f.relative_to(ROOT)} imports {name}"
        for f in files
        for name in _imports(f)
        if any(name == p or name.startswith(p + ".") for p in FORBIDDEN[layer])
    ]
    assert not bad, bad
