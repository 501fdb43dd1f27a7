"""Mutations of valid inputs, as Hypothesis strategies: what a careless or hostile user writes.

A document (a parsed TOML or JSON file) is mutated at random key paths. *Gentle* mutations keep a
document plausible (scale a number by ½–2, flip a boolean, drop an optional key, pick another
value the same key has elsewhere): most of those still validate and run, which is what makes at
least a quarter of every kind's cases exercise the code past validation. *Hostile* mutations put
the values of :data:`NUMBERS` / :data:`STRINGS` / :data:`SHAPES` anywhere (non-finite and huge
numbers, unit mistakes, NUL bytes, path traversal, long strings, wrong types), delete or add keys.
Serialized files then may get *byte* mutations (truncation, invalid UTF-8, NUL, flipped bytes).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

Path_ = tuple[Any, ...]

NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    -0.0,
    1,
    0.5,
    2,
    3,
    7,
    1e-300,
    1e9,
    1e12,
    1e30,
    1e308,
    math.inf,
    -math.inf,
    math.nan,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**64,
    -(2**63),
)
STRINGS: tuple[str, ...] = (
    "",
    "abc",
    "5",
    "5 minutes",
    "1e12s",
    "-1s",
    "0s",
    "inf",
    "nan",
    "24GiB",
    "1e30GiB",
    "430MiB/s",
    "20m",
    "\x00",
    "ok\x00",
    "..",
    ".",
    "/",
    "../../../../etc/passwd",
    "/etc/passwd",
    "/dev/zero",
    "planetlab/../../../../../../etc/passwd",
    "bitbrains/../../../../../../dev/zero",
    "a" * 300,
    "x" * 100_000,
    "é🙂\u202e",
    "line1\nline2",
    "noop",
    "upstream",
    "patched",
    "learned",
    "failure-loop",
    "small",
    "vm:101",
    "node1",
)
SHAPES: tuple[Any, ...] = (
    [],
    [1, 2],
    [[]],
    {},
    {"type": "ou", "mean": math.inf, "sigma": 0.1},
    {"type": "constant", "level": math.nan},
    {"start": 0, "count": 10**9},
    True,
    False,
    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
)
FACTORS = (0.5, 0.8, 1.25, 2.0)


def chance(draw: Any, p: float) -> bool:
    """True with probability about ``p``; Hypothesis's simplest draw (0) gives False, so its
    first, simplest examples are the unmutated inputs."""
    return bool(draw(st.integers(0, 999)) >= round(1000 * (1.0 - p)))


# ------------------------------------------------------------------------------------------ paths
def leaves(doc: Any, prefix: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, value) of a nested document, containers included (a container is a leaf too:
    it may be replaced whole)."""
    if prefix:
        yield prefix, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaves(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from leaves(v, (*prefix, i))


def get(doc: Any, path: Path_) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def put(doc: Any, path: Path_, value: Any) -> None:
    parent = get(doc, path[:-1])
    parent[path[-1]] = value


def drop(doc: Any, path: Path_) -> None:
    parent = get(doc, path[:-1])
    del parent[path[-1]]


def dotted(path: Path_) -> str:
    """``("nodes", 0, "maxcpu")`` → ``nodes[0].maxcpu`` (the ``--set`` syntax)."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# ------------------------------------------------------------------------------------------ values
def _gentle(value: Any, draw: Any, siblings: list[Any]) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        f = draw(st.sampled_from(FACTORS))
        return type(value)(value * f) if isinstance(value, int) else value * f
    if isinstance(value, str):
        m = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z/]+)", value)
        if m:  # "20m" → "10m"/"40m": a quantity with its unit, scaled
            f = draw(st.sampled_from(FACTORS))
            return f"{float(m.group(1)) * f:g}{m.group(2)}"
        same = [s for s in siblings if isinstance(s, str)]
        return draw(st.sampled_from(same)) if same else value
    return value


@st.composite
def mutated(
    draw: Any, base: Any, gentle_share: float = 0.5, max_ops: int = 3
) -> tuple[Any, list[str]]:
    """A deep copy of ``base`` with 0–``max_ops`` mutations, and a log of them."""
    doc = copy.deepcopy(base)
    gentle = not chance(draw, 1.0 - gentle_share)
    n = draw(st.integers(0 if gentle else 1, max_ops if not gentle else 2))
    log: list[str] = []
    for _ in range(n):
        paths = list(leaves(doc))
        if not paths:
            break
        path, value = paths[draw(st.integers(0, len(paths) - 1))]
        key = path[-1]
        siblings = [v for p, v in leaves(base) if p and p[-1] == key]
        if gentle:
            op = draw(st.sampled_from(("tweak", "tweak", "tweak", "drop")))
        else:
            op = draw(
                st.sampled_from(("number", "number", "string", "string", "shape", "drop", "add"))
            )
        if op == "tweak":
            new = _gentle(value, draw, siblings)
            put(doc, path, new)
            log.append(f"{dotted(path)} ~ {new!r:.60}")
        elif op == "drop" and isinstance(get(doc, path[:-1]), dict):
            drop(doc, path)
            log.append(f"del {dotted(path)}")
        elif op == "add" and isinstance(value, dict):
            k = draw(st.sampled_from(("unknown", "extra_key", "Name", "")))
            value[k] = draw(st.sampled_from(NUMBERS + STRINGS[:5]))
            log.append(f"{dotted(path)}.{k} += {value[k]!r:.40}")
        elif op in ("number", "string", "shape"):
            pool = {"number": NUMBERS, "string": STRINGS, "shape": SHAPES}[op]
            new = copy.deepcopy(draw(st.sampled_from(pool)))
            put(doc, path, new)
            log.append(f"{dotted(path)} = {new!r:.60}")
    return doc, log


# ------------------------------------------------------------------------------------------ bytes
@st.composite
def byte_mutation(draw: Any, blob: bytes, share: float = 0.15) -> tuple[bytes, str]:
    """With probability ``share``, one byte-level mutation of a serialized file."""
    if not chance(draw, share) or not blob:
        return blob, ""
    op = draw(st.sampled_from(("truncate", "utf8", "nul", "flip", "empty", "bom")))
    at = draw(st.integers(0, len(blob) - 1))
    if op == "truncate":
        return blob[:at], f"truncate at {at}"
    if op == "utf8":
        return blob[:at] + b"\xff\xfe\xc3" + blob[at:], f"invalid UTF-8 at {at}"
    if op == "nul":
        return blob[:at] + b"\x00" + blob[at:], f"NUL at {at}"
    if op == "flip":
        return blob[:at] + bytes([blob[at] ^ (1 << draw(st.integers(0, 7)))]) + blob[at + 1 :], (
            f"bit flip at {at}"
        )
    if op == "bom":
        return b"\xef\xbb\xbf" + blob, "UTF-8 BOM"
    return b"", "empty file"


# ------------------------------------------------------------------------------------------ writers
def _toml_key(k: Any) -> str:
    k = str(k)
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string takes JSON's escapes (\uXXXX included)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        return '""'
    raise TypeError(type(v))


def to_toml(doc: dict[str, Any]) -> str:
    """A document as TOML, every nested value inline (valid TOML for any nesting)."""
    return "".join(f"{_toml_key(k)} = {toml_value(v)}\n" for k, v in doc.items())


def to_json(doc: Any) -> str:
    """JSON as Python writes it — ``NaN``/``Infinity`` included, as a hand-edited file may."""
    return json.dumps(doc, allow_nan=True)
