"""What an import says about itself: a :class:`Note` for every fact of the export the scenario
leaves out (``dropped``), every value the export does not record (``assumed``) and every other
thing worth knowing (``info``) — the import never guesses silently."""

from __future__ import annotations

import time
from dataclasses import dataclass


def utc(t: float) -> str:
    """A unix time as ``2026-11-20 12:00 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


@dataclass(frozen=True)
class Note:
    """``kind``: ``dropped`` (in the export, not in the scenario), ``assumed`` (not in the
    export, a default is used) or ``info``; ``subject``: the node, guest, rule or file."""

    kind: str
    subject: str
    text: str

    def line(self) -> str:
        return f"[{self.kind}] {self.subject}: {self.text}"
