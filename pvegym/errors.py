"""One error type for every bad input, so the CLI can print one line and exit 2."""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str) -> str:
    """``text`` with control characters (newlines, NUL, …) written as escapes: one printable line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def show(value: Any, limit: int = 60, quote: bool = True) -> str:
    """A value as an error message shows it: ``repr`` (or ``str`` with ``quote=False``) on one
    line, cut to about ``limit`` characters with the full length said — a message never echoes
    a 100,000-character value back."""
    text = one_line(repr(value) if quote else str(value))
    if len(text) > limit:
        return f"{text[: max(limit - 1, 1)]}… ({len(text)} characters)"
    return text


#: at most this many characters of a key path / a message (a backstop: :func:`show` cuts values)
MAX_PATH = 120
MAX_MESSAGE = 260


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


class ConfigError(ValueError):
    """Bad user input: a scenario, a parameter, a file.

    ``path`` names the key (``nodes[1].maxmem``, ``--bandwidth``, ``cmdlist[2][0]``) and ``message``
    says what is wrong and what is allowed. ``str(err)`` is the one-line message the CLI prints:
    control characters in either part are escaped, so it is one line whatever the input held, and
    each part is cut to :data:`MAX_PATH` / :data:`MAX_MESSAGE` characters (values should already
    be shown with :func:`show`; this is the backstop).
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = _cut(one_line(str(path)), MAX_PATH)
        self.message = _cut(one_line(str(message)), MAX_MESSAGE)
        super().__init__(f"{self.path}: {self.message}" if self.path else self.message)
