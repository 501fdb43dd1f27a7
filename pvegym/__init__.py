"""pvegym: a laboratory for the automatic load balancer of Proxmox VE's HA manager.

Layers (each depends only on the ones before it):

* ``pvegym.sim``   — the model: nodes, guests, workloads, PSI, telemetry, HA rounds, migrations.
* ``pvegym.env``   — the Gymnasium environment over the model.
* ``policies``     — balancers as policies (heuristics and learned agents).
* ``pvegym.cli`` and the experiment runner — configs, evaluation, studies, reports.
"""

__version__ = "0.1.0"
