"""Typed, validated configs from plain data (TOML/JSON dicts) into frozen dataclasses.

One loader serves scenarios, experiments and studies: it walks a dataclass's type hints, converts
values (sizes like ``24GiB``, rates like ``430MiB/s``, durations like ``20m`` where a field's metadata
asks for it), checks bounds and choices, and rejects unknown keys. Every error is a
:class:`~pvegym.errors.ConfigError` naming the key path (``nodes[1].maxmem``) and what is allowed.

Field metadata keys: ``unit`` ("size" | "rate" | "duration": :func:`pvegym.units.parse_quantity`),
``ge``, ``gt``, ``le``, ``lt`` (bounds; :mod:`pvegym.limits` holds the upper ones), ``max_items``
(a list's length), ``choices``, ``parse`` (a callable ``(value, path) -> value`` for special
fields). Every number must be finite (whole numbers at most :data:`MAX_INT` unless a field bounds
them), every string at most :data:`~pvegym.limits.MAX_TEXT_CHARS` characters without NUL; values
in messages are cut (:func:`pvegym.errors.show`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import stat
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from pvegym.errors import ConfigError, show
from pvegym.limits import MAX_FILE_BYTES, MAX_NAME_BYTES, MAX_TEXT_CHARS, check_number
from pvegym.units import parse_quantity

T = TypeVar("T")


def _describe(tp: Any) -> str:
    origin = get_origin(tp)
    if origin in (list, tuple):
        return "a list"
    if origin in (dict,):
        return "a table"
    if dataclasses.is_dataclass(tp):
        return "a table"
    return getattr(tp, "__name__", str(tp))


def key_path(path: str, key: Any) -> str:
    """``path.key`` for an error message, the key shown safely (a key is user input too)."""
    k = show(key, 40, quote=False) if isinstance(key, str) else show(key, 40)
    return f"{path}.{k}" if path else k


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
        if isinstance(value, bool) or value not in allowed:
            raise ConfigError(
                path, f"{show(value)} is not allowed (allowed: {', '.join(map(str, allowed))})"
            )
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a table, not {show(value)}")
        return load(tp, value, path)  # type: ignore[arg-type]
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(path, f"must be a list, not {show(value)}")
        most = meta.get("max_items")
        if most is not None and len(value) > most:
            raise ConfigError(path, f"at most {most} entries, not {len(value)}")
        (item_tp, *_) = get_args(tp) or (Any,)
        items = [_convert(item_tp, v, f"{path}[{i}]", {}) for i, v in enumerate(value)]
        return tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a table, not {show(value)}")
        _, val_tp = get_args(tp) or (str, Any)
        return {str(k): _convert(val_tp, v, key_path(path, k), {}) for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false, not {show(value)}")
        return value
    if tp in (int, float):
        return _number(tp, value, path, meta)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a string, not {show(value)}")
        check_text(value, path)
        choices = meta.get("choices")
        if choices is not None and value not in choices:
            raise ConfigError(path, f"{show(value)} is not allowed (allowed: {', '.join(choices)})")
        return value
    raise ConfigError(path, f"cannot read {_describe(tp)}")  # pragma: no cover - programming error


#: a whole number beyond this is refused unless a field says otherwise (NumPy's int64 and float64
#: hold it exactly)
MAX_INT = 2**53


def _number(tp: Any, value: Any, path: str, meta: typing.Mapping[str, Any]) -> float | int:
    """A finite number of type ``tp`` within the field's bounds; a string with a unit where the
    field has one (:func:`pvegym.units.parse_quantity`)."""
    unit = meta.get("unit")
    if unit is not None:
        value = parse_quantity(unit, value, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, f"must be a number, not {show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(path, f"must be a finite number, not {show(value)}")
    if tp is int:
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(path, f"must be a whole number, not {show(value)}")
        value = int(value)
        if abs(value) > MAX_INT and "le" not in meta:
            raise ConfigError(
                path, f"must be a whole number of at most {MAX_INT}, not {show(value)}"
            )
    else:
        if isinstance(value, int) and abs(value) > 2**1000:
            raise ConfigError(path, f"is too large a number: {show(value)}")
        value = float(value)
    _check_bounds(value, path, meta)
    return value


def check_text(value: str, path: str) -> str:
    """A string from a config: at most :data:`~pvegym.limits.MAX_TEXT_CHARS` characters and no
    NUL byte (never meaningful, and a file system refuses it)."""
    if len(value) > MAX_TEXT_CHARS:
        raise ConfigError(path, f"longer than {MAX_TEXT_CHARS} characters ({len(value)})")
    if "\x00" in value:
        raise ConfigError(path, f"{show(value)} holds a NUL byte")
    return value


def _check_bounds(value: float, path: str, meta: typing.Mapping[str, Any]) -> None:
    check_number(
        value,
        path,
        ge=meta.get("ge"),
        gt=meta.get("gt"),
        le=meta.get("le"),
        lt=meta.get("lt"),
        unit=meta.get("unit"),
    )


def load(cls: type[T], data: typing.Mapping[str, Any], path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, validating every field; ``path`` prefixes errors."""
    if not isinstance(data, dict):
        raise ConfigError(path or "<root>", f"must be a table, not {type(data).__name__}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    for key in data:
        if key not in fields:
            raise ConfigError(
                key_path(path, key), f"unknown key (allowed: {', '.join(sorted(fields))})"
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
            name = ".".join(tokens[:i]).replace(".[", "[") or "the top level"
            if not isinstance(node, list):
                raise ConfigError(f"--set {dotted}", f"{name} is not a list: no index [{key}]")
            if key >= len(node):
                allowed = f"0..{len(node) - 1}" if node else "none: the list is empty"
                raise ConfigError(
                    f"--set {dotted}",
                    f"index {key} out of range: {name} has {len(node)} (allowed: {allowed})",
                )
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

    text = str(out)
    if "\x00" in text:
        raise ConfigError(flag, f"{show(text)} is not a path (NUL byte)")
    for part in out.parts:
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise ConfigError(flag, f"{show(part)} is longer than {MAX_NAME_BYTES} bytes")
    if out.exists() and not out.is_dir():
        raise ConfigError(flag, f"{show(text)} exists and is not a directory")


def check_out_file(path: str, flag: str) -> None:
    """A file the user names for output (``--out FILE``): a usable path (no NUL byte, no
    over-long component), not a directory."""
    check_out_dir(Path(path).parent if "\x00" not in path else Path(path), flag)
    p = Path(path)
    if len(p.name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise ConfigError(flag, f"{show(p.name)} is longer than {MAX_NAME_BYTES} bytes")
    if p.is_dir():
        raise ConfigError(flag, f"{show(path)} is a directory")


def read_input_file(path: str | Path, where: str, what: str, limit: int = MAX_FILE_BYTES) -> str:
    """The text of an input file the user named — the one reader of every file pvegym takes as
    input (scenario, experiment, study and train files, records, manifests, configs, upstream test
    files). Whatever the path holds, the answer is the text or a one-line ConfigError at
    ``where``: no such file, a directory, a device or a FIFO (opened without blocking), more than
    ``limit`` bytes, not UTF-8, a NUL byte or an over-long name in the path."""
    text = str(path)
    label = show(text, 100)
    if not text or "\x00" in text:
        raise ConfigError(where, f"{label} is not a file name")
    try:
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(where, f"no such {what} file {label}") from None
    except OSError as err:
        raise ConfigError(where, f"cannot read {what} file {label}: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ConfigError(where, f"{what} file {label} is {kind}")
        if st.st_size > limit:
            raise ConfigError(
                where, f"{what} file {label} has {st.st_size} bytes (at most {limit})"
            )
        with os.fdopen(fd, "rb", closefd=False) as fh:
            blob = fh.read(limit + 1)
    except OSError as err:
        raise ConfigError(where, f"cannot read {what} file {label}: {err.strerror}") from None
    finally:
        os.close(fd)
    if len(blob) > limit:
        raise ConfigError(where, f"{what} file {label} is larger than {limit} bytes")
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            where, f"{what} file {label} is not UTF-8 text (byte {err.start})"
        ) from None


def read_toml(path: Path, where: str, what: str) -> dict[str, Any]:
    """A TOML file's table (:func:`read_input_file`); a malformed one is an error at the file."""
    import tomllib

    text = read_input_file(path, where, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(show(str(path), 100, quote=False), f"not valid TOML: {err}") from None
    except (RecursionError, ValueError) as err:  # nesting too deep; a number TOML cannot hold
        raise ConfigError(
            show(str(path), 100, quote=False), f"not valid TOML: {type(err).__name__}"
        ) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_json(path: str | Path, where: str, what: str) -> Any:
    """A JSON file (:func:`read_input_file`); NaN/Infinity (not JSON), nesting too deep and
    malformed text are one-line errors at ``where``."""
    text = read_input_file(path, where, what)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as err:
        msg = str(err) if isinstance(err, ValueError) else "nested too deeply"
        raise ConfigError(
            where, f"{what} file {show(str(path), 100)} is not JSON: {show(msg, 80, quote=False)}"
        ) from None


def parse_value(text: str) -> Any:
    """A ``--set`` value, read as a TOML value when it is one (``true``, ``8``, ``1.5``,
    ``["a", "b"]``, ``{type = "ou", mean = 1}``), else taken as the bare string (``24GiB``)."""
    import tomllib

    if "\n" in text or "\r" in text:
        return text  # one value, not a TOML document
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):
        return text
