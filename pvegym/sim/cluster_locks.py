"""The cluster-wide locks of pmxcfs, one table for every environment that runs the HA daemons.

pve-ha-manager 5.2.0 ``src/PVE/HA/Sim/Env.pm`` ``sim_get_lock``: a lock (``ha_manager_lock``,
``ha_agent_NODE_lock``) is held by a node, renewed by its holder at every acquisition and free
again once ``timeout`` s passed since the last renewal (pmxcfs's lock lifetime, 120 s:
``Env/PVE2.pm`` ``get_pve_lock``, ``$retry_timeout``). The table maps a lock's name to
``{"time": s, "node": holder}``; where it is kept (a JSON file of the simulated hardware, the
model's shared file system, the bench's dict), the quorum check before it (``sim_get_lock``
returns 0 without quorum; the bench's cluster is always quorate and skips it) and the log line of
a new holder are the caller's.
"""

from __future__ import annotations

from typing import Any

#: s, pmxcfs's lock lifetime (``Env/PVE2.pm`` ``get_pve_lock`` ``$retry_timeout``; ``Sim/Env.pm``
#: ``lock_timeout``)
LOCK_TIMEOUT = 120.0


def sim_get_lock(
    locks: dict[str, Any],
    name: str,
    node: str,
    now: float,
    unlock: bool = False,
    timeout: float = LOCK_TIMEOUT,
) -> tuple[bool, bool]:
    """``sim_get_lock`` on the table ``locks`` for ``node`` at ``now`` (s): whether it succeeded,
    and whether ``node`` became the lock's holder (the caller logs ``got lock 'NAME'``).

    Unlock: succeeds when the lock expired, or ``node`` holds it (then it is removed). Lock: an
    unexpired lock succeeds for its holder only (renewed); an expired or absent one is taken."""
    d = locks.get(name)
    if unlock:
        if d:
            if now - d["time"] > timeout:
                return True, False
            if d["node"] == node:
                del locks[name]
                return True, False
        return False, False
    if d:
        if now - d["time"] <= timeout:
            if d["node"] == node:
                d["time"] = now
                return True, False
            return False, False
        d["node"] = node
        d["time"] = now
        return True, True
    locks[name] = {"time": now, "node": node}
    return True, True


def lock_available(
    locks: dict[str, Any], name: str, node: str, now: float, timeout: float = LOCK_TIMEOUT
) -> bool:
    """Whether :func:`sim_get_lock` of ``name`` for ``node`` at ``now`` would succeed, without
    taking it: absent, expired, or held by ``node``."""
    d = locks.get(name)
    return not d or now - d["time"] > timeout or d["node"] == node
