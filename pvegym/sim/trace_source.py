"""Where a trace file may be read from, and reading it within bounds.

A workload trace (``{type = "trace", source = "<format>/<name>", trace_dir = …}``) is user input
that names a file. It is read only from:

1. the bundled set (``pvegym/data/traces``) — when ``trace_dir`` is empty;
2. a directory beside the scenario file — a relative ``trace_dir`` (``"traces"``), resolved
   against the directory of the scenario file that holds it;
3. a directory the user named on the command line (``--trace-dir DIR``, or the
   :data:`ENV` variable, ``os.pathsep``-separated) — a relative ``trace_dir`` resolved there too,
   or an absolute one inside it.

The resolution has no way out: ``source``'s name is one file name (no ``/``, ``..``, NUL); a
``trace_dir`` has no ``..`` and an absolute one must lie inside an allowed directory; symbolic
links are followed and the file they lead to must still lie inside its root; the file is opened
non-blocking and must be a regular file (no device, FIFO or directory) of at most
:data:`~pvegym.limits.MAX_TRACE_BYTES`. Every refusal is a one-line
:class:`~pvegym.errors.ConfigError` naming the key and never quoting the file's content.

:func:`resolve_trace_source` is the one resolver: the workload model uses it, and so must every
other reader of trace files (e.g. a cluster importer writing traces beside a generated scenario).
The scenario loader says which file it reads with :func:`scenario_base`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pvegym.errors import ConfigError, show
from pvegym.limits import MAX_NAME_BYTES, MAX_TRACE_BYTES

#: The bundled trace subset (see ``pvegym/data/traces/README.md``).
TRACE_ROOT = Path(__file__).resolve().parent.parent / "data" / "traces"
#: trace format → how a source's name becomes a file name in ``<root>/<format>/``
TRACE_FORMATS: dict[str, str] = {
    "planetlab": "{name}",
    "bitbrains": "{name}.csv",
    "rrd": "{name}.csv",  # a PVE RRD series written by ``pvegym import`` (pvegym.pve_export)
}
#: directories named on the command line (``--trace-dir``), inherited by worker processes
ENV = "PVEGYM_TRACE_DIRS"

_BASE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("trace_base", default=None)


@dataclass(frozen=True)
class TraceFile:
    """A resolved trace: the file (absolute, symlinks resolved), its format and its root."""

    file: Path
    format: str
    root: Path = field(compare=False)


@contextlib.contextmanager
def scenario_base(directory: Path | str | None) -> Iterator[None]:
    """While validating a scenario read from a file: relative ``trace_dir``s are beside it."""
    token = _BASE.set(None if directory is None else Path(directory).resolve())
    try:
        yield
    finally:
        _BASE.reset(token)


def user_roots() -> tuple[Path, ...]:
    """The directories named with ``--trace-dir`` (or in :data:`ENV`), resolved."""
    text = os.environ.get(ENV, "")
    return tuple(Path(p).resolve() for p in text.split(os.pathsep) if p)


def add_user_root(directory: str, flag: str = "--trace-dir") -> Path:
    """Allow traces from ``directory`` (a command-line flag): it must be an existing directory.
    Recorded in :data:`ENV` so that worker processes allow it too."""
    if not directory or "\x00" in directory:
        raise ConfigError(flag, f"{show(directory)} is not a directory")
    p = Path(directory)
    try:
        ok = p.is_dir()
    except OSError:
        ok = False
    if not ok:
        raise ConfigError(flag, f"{show(directory)} is not a directory")
    resolved = p.resolve()
    roots = [str(r) for r in user_roots()]
    if str(resolved) not in roots:
        os.environ[ENV] = os.pathsep.join([*roots, str(resolved)])
    return resolved


def _one_name(name: str, path: str, what: str) -> None:
    if (
        not name
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
    ):
        raise ConfigError(path, f"{show(name)} is not a {what} (one file name, no path)")


def _inside(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _trace_root(trace_dir: str, base: Path | None, path: str) -> Path:
    """The directory a ``trace_dir`` names, under the rules of the module docstring."""
    if not trace_dir:
        return TRACE_ROOT
    where = path.rsplit(".", 1)[0] + ".trace_dir" if "." in path else "trace_dir"
    if "\x00" in trace_dir:
        raise ConfigError(where, f"{show(trace_dir)} is not a path (NUL byte)")
    d = Path(trace_dir)
    if ".." in d.parts:
        raise ConfigError(where, f"{show(trace_dir)} may not contain '..'")
    allowed = ([base] if base is not None else []) + list(user_roots())
    if d.is_absolute():
        real = d.resolve()
        if any(_inside(real, r) for r in allowed):
            return real
        raise ConfigError(
            where,
            f"{show(trace_dir)} is outside the scenario file's directory and every --trace-dir "
            "(traces are read only from the bundled set, beside the scenario file or from a "
            "directory named with --trace-dir)",
        )
    for root in allowed:
        candidate = (root / d).resolve()
        if _inside(candidate, root) and candidate.is_dir():
            return candidate
    if not allowed:
        raise ConfigError(
            where,
            f"{show(trace_dir)} is relative, but this scenario has no file to be beside and no "
            "--trace-dir was given",
        )
    looked = ", ".join(str(r / d) for r in allowed)
    raise ConfigError(
        where, f"no trace directory {show(trace_dir)} (looked in {show(looked, 160, quote=False)})"
    )


def resolve_trace_source(
    source: str,
    trace_dir: str = "",
    *,
    base: Path | None = None,
    path: str = "source",
) -> TraceFile:
    """The file a ``source`` (``"<format>/<name>"``) names under ``trace_dir``: bundled when
    ``trace_dir`` is empty, else beside the scenario file (``base``, default: the one being
    loaded, :func:`scenario_base`) or under a ``--trace-dir``. Refusals name ``path``."""
    if base is None:
        base = _BASE.get()
    fmt, sep, name = source.partition("/")
    if not sep or fmt not in TRACE_FORMATS or not name:
        raise ConfigError(
            path,
            f"{show(source)} is not a trace source (allowed: "
            + ", ".join(f"{f}/<{'vm-id' if f == 'bitbrains' else 'name'}>" for f in TRACE_FORMATS)
            + ")",
        )
    _one_name(name, path, "trace name")
    root = _trace_root(trace_dir, base, path)
    file = root / fmt / TRACE_FORMATS[fmt].format(name=name)
    try:
        real = file.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(path, f"{_label(file)}: no such trace file") from None
    except (OSError, RuntimeError) as err:  # a symlink loop, a name too long
        raise ConfigError(
            path, f"{_label(file)}: cannot be resolved ({type(err).__name__})"
        ) from None
    if not _inside(real, root.resolve()):
        raise ConfigError(path, f"{_label(file)} leads outside its trace directory (a symlink)")
    return TraceFile(real, fmt, root)


def _label(file: Path) -> str:
    """How messages name a trace file: relative to the bundled set where it is bundled."""
    text = str(file)
    root = str(TRACE_ROOT)
    return show(text[len(root) + 1 :] if text.startswith(root + os.sep) else text, 120, quote=False)


def read_trace_text(tf: TraceFile, path: str = "source") -> str:
    """The text of a resolved trace file: opened without blocking and without following a
    symlink swapped in since it was resolved, a regular file of at most
    :data:`~pvegym.limits.MAX_TRACE_BYTES`, UTF-8."""
    label = _label(tf.file)
    try:
        fd = os.open(tf.file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as err:
        raise ConfigError(path, f"{label}: cannot open ({err.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(path, f"{label} is not a regular file")
        if st.st_size > MAX_TRACE_BYTES:
            raise ConfigError(path, f"{label} has {st.st_size} bytes (at most {MAX_TRACE_BYTES})")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            blob = fh.read(MAX_TRACE_BYTES + 1)
    finally:
        os.close(fd)
    if len(blob) > MAX_TRACE_BYTES:
        raise ConfigError(path, f"{label} is larger than {MAX_TRACE_BYTES} bytes")
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(path, f"{label}: not UTF-8 text (byte {err.start})") from None


__all__ = [
    "ENV",
    "TRACE_FORMATS",
    "TRACE_ROOT",
    "TraceFile",
    "add_user_root",
    "read_trace_text",
    "resolve_trace_source",
    "scenario_base",
    "user_roots",
]
