"""The model's size limits (issue 31 item 4): no class of ``pvegym/sim`` over 600 lines outside
the port (``pvegym/sim/ha/`` mirrors upstream's Perl files, one module per file, and keeps
their shape), and the round's orchestration, ``simulation.py``, at most 500 lines: the parts it
runs live in their own modules (``motions.py``, ``telemetry_view.py``, ``hardware.py``,
``motion_commit.py``, …)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "pvegym" / "sim"
PORT = SIM / "ha"
CLASS_LIMIT = 600
SIMULATION_LIMIT = 500


def class_lengths(source: str) -> dict[str, int]:
    """Qualified class name → its length in lines (decorators included), nested ones too."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                out[prefix + child.name] = (child.end_lineno or child.lineno) - first + 1
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return out


def test_the_measure_sees_a_long_class() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(CLASS_LIMIT))
    lengths = class_lengths(f"@decorated\nclass Big:\n{body}\n\n\nclass Small:\n    pass\n")
    assert lengths == {"Big": CLASS_LIMIT + 2, "Small": 2}


def test_no_class_of_the_model_outside_the_port_is_over_the_limit() -> None:
    files = [p for p in sorted(SIM.rglob("*.py")) if PORT not in p.parents]
    assert len(files) > 20, "the model's modules were not found"
    over = {
        f"{p.relative_to(ROOT)}::{name}": n
        for p in files
        for name, n in class_lengths(p.read_text()).items()
        if n > CLASS_LIMIT
    }
    assert not over, f"classes over {CLASS_LIMIT} lines: {over}"


def test_simulation_module_is_the_round_orchestration_only() -> None:
    lines = len((SIM / "simulation.py").read_text().splitlines())
    assert lines <= SIMULATION_LIMIT, f"simulation.py has {lines} lines (limit {SIMULATION_LIMIT})"
