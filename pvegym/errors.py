"""One error type for every bad input, so the CLI can print one line and exit 2."""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input: a scenario, a parameter, a file.

    ``path`` names the key (``nodes[1].maxmem``, ``--bandwidth``, ``cmdlist[2][0]``) and ``message``
    says what is wrong and what is allowed. ``str(err)`` is the one-line message the CLI prints.
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)
