"""pvegym: a laboratory for the automatic load balancer of Proxmox VE's HA manager.

Layers (each depends only on the ones before it):

* ``pvegym.sim``   — the model: nodes, guests, workloads, PSI, telemetry, HA rounds, migrations.
* ``pvegym.env``   — the Gymnasium environment over the model.
* ``policies``     — balancers as policies (heuristics and learned agents).
* ``pvegym.cli`` and the experiment runner — configs, evaluation, studies, reports.
"""

from importlib.metadata import PackageNotFoundError, version

from pvegym.registration import register_when_gymnasium_is_imported

try:
    __version__ = version("pvegym")
except PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0.1.0"

# gymnasium.make("pvegym/Cluster-v0" or "-v1") after `import pvegym`, without importing Gymnasium
register_when_gymnasium_is_imported()
