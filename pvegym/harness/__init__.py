"""Upstream's regression-test hardware: replay pve-ha-manager test directories on pvegym's HA stack.

``read_testdir`` checks a directory (``testdir.py``); :class:`TestHardware` is upstream's simulated
cluster and event loop (``hardware.py``, ``sim_env.py``, ``sim_resources.py``, ``testhardware.py``)
running the model layer's CRM/Manager/LRM (:mod:`pvegym.sim.ha`); ``replay_dir`` runs it with
:class:`pvegym.policies.upstream.UpstreamPolicy` as the balancer (``replay.py``). ``docs/cli.md``
(``pvegym replay-upstream``).
"""

from pvegym.harness.replay import Decision, ReplayResult, first_difference, replay, replay_dir
from pvegym.harness.testdir import TestDir, read_testdir
from pvegym.harness.testhardware import TestHardware

__all__ = [
    "Decision",
    "ReplayResult",
    "TestDir",
    "TestHardware",
    "first_difference",
    "read_testdir",
    "replay",
    "replay_dir",
]
