"""Helpers of the model's tests (``tests/sim``)."""

import json
from pathlib import Path


def trace_scenario(path: Path, source: str, trace_dir: str | Path, **options: str | float) -> Path:
    """Write to ``path`` a 2-minute scenario of one node (8 cores, 16 GiB) and one guest (2 cores,
    2 GiB) whose CPU is the trace ``source`` read from ``trace_dir``, with ``options`` (``field``,
    ``scale`` …) in the same table; ``path``."""
    extra = "".join(f", {key} = {json.dumps(value)}" for key, value in options.items())
    path.write_text(
        f"""duration = "2m"
[[nodes]]
name = "node1"
maxcpu = 8
maxmem = "16GiB"
[[guests]]
sid = "vm:100"
node = "node1"
maxcpu = 2
maxmem = "2GiB"
memhost = "1GiB"
cpu = [{{ type = "trace", source = "{source}", trace_dir = "{trace_dir}"{extra} }}]
"""
    )
    return path
