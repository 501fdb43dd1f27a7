"""Typed, validated configs from plain data (TOML/JSON dicts) into frozen dataclasses.

One loader serves scenarios, experiments and studies: it walks a dataclass's type hints, converts
values (sizes like ``24GiB``, rates like ``430MiB/s``, durations like ``20m`` where a field's metadata
asks for it), checks bounds and choices, and rejects unknown keys. Every error is a
:class:`~pvegym.errors.ConfigError` naming the key path (``nodes[1].maxmem``) and what is allowed.

Field metadata keys: ``unit`` ("size" | "rate" | "duration"), ``ge``, ``gt``, ``le``, ``lt``,
``choices``, ``parse`` (a callable ``(value, path) -> value`` for special fields).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from pvegym.errors import ConfigError
from pvegym.units import parse_duration, parse_rate, parse_size

T = TypeVar("T")

_UNIT_PARSERS = {"size": parse_size, "rate": parse_rate, "duration": parse_duration}


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (list, tuple):
        return "a list"
    if origin in (dict,):
        return "a table"
    if dataclasses.is_dataclass(tp):
        return "a table"
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, path: str, meta: typing.Mapping[str, Any]) -> Any:
    if "parse" in meta:
        return meta["parse"](value, path)
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            if type(None) in get_args(tp):
                return None
            raise ConfigError(path, "must not be empty")
        return _convert(args[0], value, path, meta)
    if origin is typing.Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ConfigError(
                path, f"{value!r} is not allowed (allowed: {', '.join(map(str, allowed))})"
            )
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a table, not {type(value).__name__}")
        return load(tp, value, path)  # type: ignore[arg-type]
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(path, f"must be a list, not {type(value).__name__}")
        (item_tp, *_) = get_args(tp) or (Any,)
        items = [_convert(item_tp, v, f"{path}[{i}]", {}) for i, v in enumerate(value)]
        return tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a table, not {type(value).__name__}")
        _, val_tp = get_args(tp) or (str, Any)
        return {str(k): _convert(val_tp, v, f"{path}.{k}", {}) for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false, not {value!r}")
        return value
    if tp in (int, float):
        if "unit" in meta and isinstance(value, str):
            value = _UNIT_PARSERS[meta["unit"]](value, path)
        if isinstance(value, bool) or not isinstance(value, int | float):
            unit = meta.get("unit")
            hint = (
                f" (e.g. {'24GiB' if unit == 'size' else '430MiB/s' if unit == 'rate' else '20m'})"
                if unit
                else ""
            )
            raise ConfigError(path, f"must be a number{hint}, not {value!r}")
        if tp is int:
            if float(value) != int(value):
                raise ConfigError(path, f"must be a whole number, not {value!r}")
            value = int(value)
        else:
            value = float(value)
        if value != value:  # NaN
            raise ConfigError(path, "must be a number, not NaN")
        _check_bounds(value, path, meta)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a string, not {value!r}")
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            raise ConfigError(path, f"{value!r} is not allowed (allowed: {', '.join(choices)})")
        return value
    raise ConfigError(path, f"cannot read {_describe(tp)}")  # pragma: no cover - programming error


def _check_bounds(value: float, path: str, meta: typing.Mapping[str, Any]) -> None:
    if "ge" in meta and value < meta["ge"]:
        raise ConfigError(path, f"must be ≥ {meta['ge']}, not {value!r}")
    if "gt" in meta and value <= meta["gt"]:
        raise ConfigError(path, f"must be > {meta['gt']}, not {value!r}")
    if "le" in meta and value > meta["le"]:
        raise ConfigError(path, f"must be ≤ {meta['le']}, not {value!r}")
    if "lt" in meta and value >= meta["lt"]:
        raise ConfigError(path, f"must be < {meta['lt']}, not {value!r}")


def load(cls: type[T], data: typing.Mapping[str, Any], path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, validating every field; ``path`` prefixes errors."""
    if not isinstance(data, dict):
        raise ConfigError(path or "<root>", f"must be a table, not {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    for key in data:
        if key not in fields:
            raise ConfigError(
                f"{path}.{key}" if path else str(key),
                f"unknown key (allowed: {', '.join(sorted(fields))})",
            )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], sub, f.metadata)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(sub, "is required")
    obj = cls(**kwargs)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate(path)
    return obj


def field(default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """``dataclasses.field`` with validation metadata (see the module docstring)."""
    if isinstance(default, list | dict):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Apply an override ``a.b[2].c=value`` to nested plain data (used by ``--set``)."""
    import re

    tokens = re.findall(r"[^.\[\]]+|\[\d+\]", dotted)
    if not tokens:
        raise ConfigError("--set", f"empty key in {dotted!r}")
    node: Any = data
    for i, tok in enumerate(tokens):
        last = i == len(tokens) - 1
        key: Any = int(tok[1:-1]) if tok.startswith("[") else tok
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                raise ConfigError(f"--set {dotted}", f"index {key} out of range")
        elif not isinstance(node, dict):
            raise ConfigError(f"--set {dotted}", f"{tok!r} is not a table key here")
        if last:
            node[key] = value
        else:
            if isinstance(key, str) and key not in node:
                node[key] = {}
            node = node[key]


def check_dir_names(pre: str, name: str, output: str) -> None:
    """A config's ``name`` and ``output`` name directories under ``results/``: one path component
    (:func:`check_name`; key paths ``{pre}name`` / ``{pre}output``)."""
    for key, value in (("name", name), ("output", output)):
        check_name(value, f"{pre}{key}", "directory name")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_name(value: str, path: str, what: str = "name") -> str:
    """A name that becomes one file or directory name: not empty, at most
    :data:`~pvegym.limits.MAX_NAME_BYTES` bytes of UTF-8, no ``/`` or ``\\``, no control
    characters (NUL, newline), not hidden (``.``, ``..``, ``.x``). Anything else is a one-line
    ConfigError at ``path`` — a label never writes outside its run's directory."""
    from pvegym.errors import show
    from pvegym.limits import MAX_NAME_BYTES

    problem = ""
    if not value:
        problem = "is empty"
    elif len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        problem = f"is longer than {MAX_NAME_BYTES} bytes"
    elif "/" in value or "\\" in value:
        problem = "holds a path separator"
    elif _CONTROL.search(value):
        problem = "holds a control character"
    elif value.startswith("."):
        problem = "starts with a dot"
    if problem:
        raise ConfigError(path, f"{show(value)} is not a usable {what}: it {problem}")
    return value


def path_component(text: str) -> str:
    """``text`` as one safe file name for outputs (records, plots): characters other than
    letters, digits and ``-_.#+=,@`` become ``_``, a leading dot is escaped, and a long name is cut
    with a hash of the whole (so distinct long names stay distinct). Never ``.``/``..``, never a
    separator, at most 200 bytes."""
    import hashlib

    safe = "".join(
        ch if (ch.isascii() and ch.isalnum()) or ch in "-_.#+=,@" else "_" for ch in text
    )
    if not safe or safe.startswith("."):
        safe = "_" + safe
    if len(safe) > 200:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        safe = f"{safe[:180]}-{digest}"
    return safe


def check_out_dir(out: Path, flag: str = "--out") -> None:
    """An output directory the user named: a path the file system can hold (no NUL byte, no
    over-long component), and a directory if it exists."""
    from pvegym.errors import show
    from pvegym.limits import MAX_NAME_BYTES

    text = str(out)
    if "\x00" in text:
        raise ConfigError(flag, f"{show(text)} is not a path (NUL byte)")
    for part in out.parts:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ConfigError(flag, f"{show(part)} is longer than {MAX_NAME_BYTES} bytes")
    if out.exists() and not out.is_dir():
        raise ConfigError(flag, f"{show(text)} exists and is not a directory")


def read_toml(path: Path, where: str, what: str) -> dict[str, Any]:
    """A TOML file's table: a missing file is a :class:`ConfigError` at ``where`` ("no such
    ``what`` file"), a malformed one at the file's path."""
    import tomllib

    if not path.is_file():
        raise ConfigError(where, f"no such {what} file {str(path)!r}")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(str(path), f"not valid TOML: {err}") from None


def parse_value(text: str) -> Any:
    """A ``--set`` value, read as a TOML value when it is one (``true``, ``8``, ``1.5``,
    ``["a", "b"]``, ``{type = "ou", mean = 1}``), else taken as the bare string (``24GiB``)."""
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
