"""Perl value semantics that upstream's HA code relies on and a faithful port must reproduce.

pve-ha-manager stores everything in Perl hashes of scalars. Where the ported code's behaviour
depends on Perl's rules rather than on the algorithm, the rule lives here, once:

* ``PerlDie`` — a Perl ``die``: ``message`` is the exact text of ``$@`` (usually ending in ``"\\n"``).
* ``truthy(value)`` — Perl truthiness: ``undef``, ``""``, ``"0"`` and ``0`` are false, references
  (dicts, lists) are true.
* ``to_str(value)`` — Perl stringification (``"$value"``): ``undef`` → ``""``, numbers as Perl prints
  them (``%.15g`` for floats).
* ``numify(value)`` — Perl numification (``$value + 0``) of a decimal string.
* ``lc(text)`` — Perl's ``lc`` on a byte string (ASCII letters only).
* ``perl_int(digits)`` — ``int()`` of a digit string: exact up to 2**64−1, a float beyond.
* ``split(pattern, text)`` — Perl's ``split /pattern/, text``: trailing empty fields are dropped.
* ``to_json(value)`` — ``JSON->new->canonical->pretty->utf8`` (JSON::PP and JSON::XS agree): three
  spaces of indent, ``"key" : value``, sorted keys, a final newline.

Strings hold what Perl holds: upstream reads files as bytes, so a file's text is kept as Latin-1
characters (one character per byte); see ``pvegym.sim.ha.section_config.parse_config``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: Perl's ``\\s`` and ``\\S`` on byte strings: ASCII whitespace only (``re.ASCII`` makes Python's
#: ``\\s`` match exactly ``[ \\t\\n\\r\\f\\v]``, as Perl's does).
ASCII = re.ASCII

_NUMBER_PREFIX = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", ASCII)
_INTEGER = re.compile(r"[+-]?\d+", ASCII)
#: the largest integer Perl holds exactly (an unsigned 64-bit IV); larger ones become floats
_PERL_UV_MAX = 2**64 - 1


class PerlDie(Exception):
    """A Perl ``die``: ``message`` is ``$@`` verbatim, trailing newline included."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message.rstrip("\n"))


def truthy(value: object) -> bool:
    """Perl truthiness of a scalar (``undef``, ``""``, ``"0"``, ``0`` are false; references true)."""
    if value is None:
        return False
    if isinstance(value, str):
        return value not in ("", "0")
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    return True  # a reference (hash, array) is always true, even when empty


def to_str(value: object) -> str:
    """Perl stringification: ``undef`` is ``""``, floats print with 15 significant digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else ""
    if isinstance(value, float):
        return "%.15g" % value  # noqa: UP031 - Perl's own number format (NV, 15 digits)
    return str(value)


def lc(text: str) -> str:
    """Perl's ``lc`` on a byte string: ASCII letters only."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def perl_int(digits: str) -> int | float:
    """``int($digits)`` for a string of decimal digits: exact up to 2**64−1, a float beyond."""
    n = int(digits)
    return n if abs(n) <= _PERL_UV_MAX else float(n)


def numify(value: object) -> int | float:
    """``$value + 0``: the leading decimal number of a string (0 if there is none)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    text = to_str(value)
    m = _NUMBER_PREFIX.match(text)
    if not m:
        return 0
    number = m.group(1)
    if _INTEGER.fullmatch(number):
        return perl_int(number)
    return float(number)


def split(pattern: str, text: str) -> list[str]:
    """Perl's ``split /pattern/, text`` (ASCII classes): trailing empty fields are removed."""
    fields = re.split(pattern, text, flags=ASCII)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def to_json(value: object) -> str:
    """``to_json($value, {canonical => 1, pretty => 1, utf8 => 1})`` as text (encode it UTF-8)."""
    return _encode(value, 0) + "\n"


_INDENT = "   "


def _encode(value: Any, level: int) -> str:
    pad = _INDENT * (level + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{pad}{_string(str(k))} : {_encode(value[k], level + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + _INDENT * level + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        items = [f"{pad}{_encode(v, level + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + _INDENT * level + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return to_str(value)
    return _string(str(value))


def _string(text: str) -> str:
    # JSON::PP/XS escape '"', '\\', \b \f \n \r \t and other controls as \u00xx, nothing else
    return json.dumps(text, ensure_ascii=False)
