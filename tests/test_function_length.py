"""No function of the shipped code is longer than 80 lines (decorators and docstring included).

Long functions hide their seams; the limit makes a function readable in one screen. The scope is
the shipped code (``pvegym/``, ``pvegym/policies/``, ``scripts/``); the numba kernels (``@njit``) are
exempt: a compiled loop is split at the cost of a call per element. Tests are out of scope: their
longest functions are fixture builders (``tests/data/pve-exports/build_fixtures.py``) and a
page-level reference written straight-line on purpose (``tests/sim/reference_migration.py``).

:data:`EXCEPTIONS` lists the long functions that are not split yet, each with its reason; a
function longer than the limit that is not listed fails, and so does a listed one that is short
now or gone (remove it from the list).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCOPE = ("pvegym", "scripts")
LIMIT = 80

#: ``path::qualified.name`` → why it is still long (each waits for a change in progress)
EXCEPTIONS: dict[str, str] = {
    "pvegym/sim/telemetry_view.py::TelemetryView.build": "the view is built by one positional "
    "call, a line per ClusterView field (a keyword call costs ~1 µs a round)",
    "pvegym/sim/telemetry_view.py::TelemetryView.__init__": "moved out of Simulation as it was "
    "(issue 31 item 4); the per-guest flags it binds go into one helper with the engine's view",
    "pvegym/sim/engine/differential.py::History.next": "the differential check's random round "
    "(every event kind in one place); split with the LRM's events (issue 31)",
}


def _is_kernel(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with numba's ``njit``/``jit`` (``@njit``, ``@njit(cache=True)``, ``@numba.njit``)."""
    for deco in fn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def long_functions(root: Path = ROOT) -> dict[str, int]:
    """``path::qualified.name`` → length in lines, for every function over :data:`LIMIT`."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str, rel: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", rel)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                length = (child.end_lineno or child.lineno) - first + 1
                if length > LIMIT and not _is_kernel(child):
                    out[f"{rel}::{prefix}{child.name}"] = length
                visit(child, f"{prefix}{child.name}.", rel)

    for top in SCOPE:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            visit(ast.parse(path.read_text(), rel), "", rel)
    return out


def test_no_function_over_the_limit() -> None:
    found = long_functions()
    new = {k: v for k, v in found.items() if k not in EXCEPTIONS}
    assert not new, f"functions over {LIMIT} lines (split them at their seams): {new}"


def test_exceptions_are_current() -> None:
    """Every listed exception is still a long function: the list only shrinks."""
    stale = sorted(set(EXCEPTIONS) - set(long_functions()))
    assert not stale, f"no longer over {LIMIT} lines (remove from EXCEPTIONS): {stale}"


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    """A function of 81 lines fails, an ``@njit`` kernel of the same length does not."""
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (tmp_path / "pvegym").mkdir()
    (tmp_path / "pvegym" / "m.py").write_text(
        f"def long():\n{body}    return 0\n\n\n@njit(cache=True)\ndef kernel():\n{body}    return 0\n"
        f"\n\nclass C:\n    def short(self):\n        return 1\n"
    )
    for top in SCOPE[1:]:
        (tmp_path / top).mkdir()
    assert long_functions(tmp_path) == {"pvegym/m.py::long": 81}
