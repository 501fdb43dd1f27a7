"""pvegym: a laboratory for the automatic load balancer of Proxmox VE's HA manager.

Layers (each depends only on the ones before it):

* ``pvegym.sim``   — the model: nodes, guests, workloads, PSI, telemetry, HA rounds, migrations.
* ``pvegym.env``   — the Gymnasium environment over the model.
* ``policies``     — balancers as policies (heuristics and learned agents).
* ``pvegym.cli`` and the experiment runner — configs, evaluation, studies, reports.
"""

from typing import Any

from pvegym.registration import register_when_gymnasium_is_imported


def __getattr__(name: str) -> Any:
    """``pvegym.__version__``, read from the installed metadata on first use: importing
    :mod:`importlib.metadata` (email, zipfile, csv, …) would slow every ``import pvegym`` and
    ``pvegym --help`` (``pvegym.cli``) for a string few commands print."""
    if name != "__version__":
        raise AttributeError(f"module 'pvegym' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("pvegym")
    except PackageNotFoundError:  # run from a source tree that is not installed
        found = "0.1.0"
    globals()["__version__"] = found
    return found


# gymnasium.make("pvegym/Cluster-v0" or "-v1") after `import pvegym`, without importing Gymnasium
register_when_gymnasium_is_imported()
