"""The files of an export: a directory or a tarball, read as JSON, errors naming file and field.

``scripts/pve-export.sh`` writes one directory (optionally packed as ``.tar.gz``): plain JSON for
the configuration and status, gzip-compressed JSON (``*.json.gz``) for the RRD series. A tarball is
read in place (nothing is extracted), with or without one top-level directory. Every read is
bounded (:data:`MAX_FILE_BYTES` uncompressed), so a damaged or hostile export cannot exhaust memory.

:class:`Value` wraps a decoded JSON value with its file and key path; its accessors check the type
and raise :class:`ExportError` — a :class:`~pvegym.errors.ConfigError` whose path is
``<file> <field>`` (``cluster/resources.json [3].maxmem``), so ``pvegym import`` prints one line
and exits 2.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import tarfile
from pathlib import Path
from typing import Any

from pvegym.errors import ConfigError
from pvegym.units import MiB

#: Largest file read from an export, uncompressed (bytes). A week of 1-minute RRD rows for one
#: guest is ~0.7 MB as JSON.
MAX_FILE_BYTES = 256 * MiB


class ExportError(ConfigError):
    """A bad or partial export: ``file`` (relative to the export) and ``field`` (a key path)."""

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = file
        self.field = field
        super().__init__(f"{file} {field}".rstrip() if field else file, message)


class Value:
    """A JSON value read from ``file`` at key path ``field`` (``""`` = the whole file)."""

    __slots__ = ("field", "file", "raw")

    def __init__(self, raw: Any, file: str, field: str = "") -> None:
        self.raw = raw
        self.file = file
        self.field = field

    def error(self, message: str) -> ExportError:
        return ExportError(self.file, self.field, message)

    def _sub(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.field}[{key}]"
        return f"{self.field}.{key}" if self.field else key

    def _kind(self) -> str:
        return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
            type(self.raw), "null" if self.raw is None else "a number"
        )

    # containers
    def obj(self) -> dict[str, Any]:
        if not isinstance(self.raw, dict):
            raise self.error(f"must be a JSON object, not {self._kind()}")
        return self.raw

    def items(self) -> list[Value]:
        if not isinstance(self.raw, list):
            raise self.error(f"must be a JSON list, not {self._kind()}")
        return [Value(v, self.file, self._sub(i)) for i, v in enumerate(self.raw)]

    def has(self, key: str) -> bool:
        return key in self.obj() and self.obj()[key] is not None

    def get(self, key: str) -> Value:
        """A required member."""
        data = self.obj()
        if key not in data or data[key] is None:
            raise ExportError(self.file, self._sub(key), "is missing")
        return Value(data[key], self.file, self._sub(key))

    def opt(self, key: str) -> Value | None:
        """An optional member (``None`` when absent or null)."""
        data = self.obj()
        if key not in data or data[key] is None:
            return None
        return Value(data[key], self.file, self._sub(key))

    def members(self) -> list[tuple[str, Value]]:
        return [(str(k), Value(v, self.file, self._sub(str(k)))) for k, v in self.obj().items()]

    # scalars
    def text(self) -> str:
        if isinstance(self.raw, str):
            return self.raw
        if isinstance(self.raw, int | float) and not isinstance(self.raw, bool):
            return str(self.raw)  # pvesh prints some ids as numbers
        raise self.error(f"must be a string, not {self._kind()}")

    def num(self, minimum: float | None = 0.0) -> float:
        """A finite number (pvesh prints some numbers as strings: accepted), ≥ ``minimum``."""
        raw = self.raw
        if isinstance(raw, str):
            try:
                raw = float(raw)
            except ValueError:
                raise self.error(f"must be a number, not {self.raw!r}") from None
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise self.error(f"must be a number, not {self._kind()}")
        value = float(raw)
        if not math.isfinite(value):
            raise self.error(f"must be a finite number, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(f"must be ≥ {minimum:g}, not {value:g}")
        return value

    def int(self, minimum: int | None = 0) -> int:
        value = self.num(None)
        if value != int(value):
            raise self.error(f"must be a whole number, not {value:g}")
        if minimum is not None and value < minimum:
            raise self.error(f"must be ≥ {minimum}, not {int(value)}")
        return int(value)

    def flag(self) -> bool:
        """A PVE boolean: ``0``/``1`` (or JSON true/false, or the strings "0"/"1")."""
        if isinstance(self.raw, bool):
            return self.raw
        if self.raw in (0, 1, "0", "1"):
            return bool(int(self.raw))
        raise self.error(f"must be 0 or 1, not {self.raw!r}")


class ExportFiles:
    """The files of one export (a directory, or a ``.tar``/``.tar.gz``/``.tgz`` read in place)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tar: tarfile.TarFile | None = None
        self._members: dict[str, tarfile.TarInfo] = {}
        if path.is_dir():
            return
        if not path.exists():
            raise ConfigError("EXPORT", f"no such export directory or tarball {str(path)!r}")
        try:
            self._tar = tarfile.open(path, "r:*")  # noqa: SIM115 - closed by close()
            infos = self._tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as err:
            raise ConfigError(
                "EXPORT", f"{str(path)!r} is not a directory or a tarball: {err}"
            ) from None
        names = [i.name.lstrip("./") for i in infos if i.isfile()]
        tops = {n.split("/", 1)[0] for n in names}
        prefix = ""
        if len(tops) == 1 and all("/" in n for n in names):  # one top-level directory
            prefix = next(iter(tops)) + "/"
        for info in infos:
            name = info.name.lstrip("./")
            if info.isfile() and name.startswith(prefix):
                self._members[name[len(prefix) :]] = info

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()

    def exists(self, rel: str) -> bool:
        return self._find(rel) is not None

    def _find(self, rel: str) -> str | None:
        """``rel`` itself, or ``rel + ".gz"`` (the compressed form)."""
        for name in (rel, rel + ".gz"):
            if self._tar is not None:
                if name in self._members:
                    return name
            elif (self.path / name).is_file():
                real = (self.path / name).resolve()
                if not real.is_relative_to(self.path.resolve()):
                    raise ExportError(name, "", "is a symlink out of the export")
                return name
        return None

    def names(self, prefix: str) -> list[str]:
        """Relative names of the files under directory ``prefix`` (sorted, ``.gz`` stripped)."""
        pre = prefix.rstrip("/") + "/"
        if self._tar is not None:
            names = [n for n in self._members if n.startswith(pre)]
        else:
            root = self.path / prefix
            names = (
                [p.relative_to(self.path).as_posix() for p in root.rglob("*") if p.is_file()]
                if root.is_dir()
                else []
            )
        return sorted({n.removesuffix(".gz") for n in names})

    def _read_bytes(self, name: str) -> bytes:
        if self._tar is not None:
            info = self._members[name]
            if info.size > MAX_FILE_BYTES:
                raise ExportError(
                    name, "", f"{info.size} bytes, more than {MAX_FILE_BYTES} allowed"
                )
            fh = self._tar.extractfile(info)
            if fh is None:  # pragma: no cover - isfile() members always have data
                raise ExportError(name, "", "cannot read this tarball member")
            data = fh.read(MAX_FILE_BYTES + 1)
        else:
            with open(self.path / name, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        if name.endswith(".gz"):
            try:
                with gzip.GzipFile(fileobj=io.BytesIO(data)) as gz:
                    data = gz.read(MAX_FILE_BYTES + 1)
            except (OSError, EOFError) as err:
                raise ExportError(name, "", f"not valid gzip data: {err}") from None
        if len(data) > MAX_FILE_BYTES:
            raise ExportError(name, "", f"larger than {MAX_FILE_BYTES} bytes")
        return data

    def json(self, rel: str, required: bool = True) -> Value | None:
        """The decoded JSON of ``rel`` (or ``rel.gz``); ``None`` if absent and not ``required``."""
        name = self._find(rel)
        if name is None:
            if required:
                raise ExportError(rel, "", "is missing from the export")
            return None
        try:
            doc = json.loads(self._read_bytes(name))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ExportError(name, "", f"not valid JSON: {err}") from None
        return Value(doc, name)
