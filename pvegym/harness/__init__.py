"""Upstream's regression-test harness: read pve-ha-manager test directories and replay them.

``read_testdir`` parses a directory (``testdir.py``); ``replay_dir`` runs it in upstream's harness
timing with :class:`policies.upstream.UpstreamPolicy` (``replay.py``). See
``reference/pve-ha-manager.md`` §8 and ``MODEL.md`` §5/§12 (``pvegym replay-upstream``).
"""

from pvegym.harness.replay import Decision, ReplayResult, replay, replay_dir
from pvegym.harness.testdir import TestDir, read_testdir

__all__ = ["Decision", "ReplayResult", "TestDir", "read_testdir", "replay", "replay_dir"]
