"""The cluster-wide locks of pmxcfs, one table for every environment that runs the HA daemons.

pve-ha-manager 5.2.0 ``src/PVE/HA/Sim/Env.pm`` ``sim_get_lock``: a lock (``ha_manager_lock``,
``ha_agent_NODE_lock``) is held by a node, renewed by its holder at every acquisition and free
again once ``timeout`` s passed since the last renewal (pmxcfs's lock lifetime, 120 s:
``Env/PVE2.pm`` ``get_pve_lock``, ``$retry_timeout``). The table maps a lock's name to
``{"time": s, "node": holder}``.

:class:`SimLockEnv` is ``Sim/Env.pm``'s lock calls on it (``sim_get_lock``: no lock without
quorum, ``got lock 'NAME'`` logged for a new holder; the manager lock; each node's agent lock),
the one implementation the three environments that run the daemons share: the model's hardware
(:mod:`pvegym.sim.ha_model_env`, the table in its shared file system), upstream's regression
hardware (:mod:`pvegym.harness.sim_env`, a JSON file) and the bench's
(:mod:`pvegym.experiments.bench_ha`, a dict; its cluster is always quorate and skips the quorum
check, and it logs no lock line). Each says only where its table is.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from pvegym.sim.ha.env import HAEnv

#: the CRM master's lock (``Sim/Env.pm`` ``get_ha_manager_lock``)
MANAGER_LOCK = "ha_manager_lock"

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


def agent_lock(node: str) -> str:
    """The LRM agent lock of ``node`` (``Sim/Env.pm`` ``get_ha_agent_lock_name``)."""
    return f"ha_agent_{node}_lock"


class SimLockEnv(HAEnv):
    """An :class:`~pvegym.sim.ha.env.HAEnv` whose cluster-wide locks are ``Sim/Env.pm``'s on
    the one table (:func:`sim_get_lock`); a subclass says where the table is
    (:meth:`lock_table`, and :meth:`lock_table_written` for one kept in a file)."""

    #: ``sim_get_lock`` returns 0 without quorum (False: a cluster that is always quorate)
    lock_quorum_check: ClassVar[bool] = True
    #: a new holder logs ``got lock 'NAME'``
    lock_log: ClassVar[bool] = True

    @abstractmethod
    def lock_table(self) -> dict[str, Any]:
        """The lock table (read for this call)."""

    def lock_table_written(self, table: dict[str, Any]) -> None:
        """After each lock call: the table as it is now (a table kept in a file writes it)."""

    def sim_get_lock(self, lock_name: str, unlock: bool = False) -> bool:
        """``Sim/Env.pm`` ``sim_get_lock`` for this node at its time."""
        if self.lock_quorum_check and not self.quorate():
            return False
        table = self.lock_table()
        res, got = sim_get_lock(table, lock_name, self.nodename(), self.get_time(), unlock)
        if got and self.lock_log:
            self.log("info", f"got lock '{lock_name}'")
        self.lock_table_written(table)
        return res

    def get_ha_manager_lock(self) -> bool:
        return self.sim_get_lock(MANAGER_LOCK)

    def release_ha_manager_lock(self) -> bool:
        return self.sim_get_lock(MANAGER_LOCK, unlock=True)

    def get_ha_agent_lock(self, node: str | None = None) -> bool:
        return self.sim_get_lock(agent_lock(node or self.nodename()))

    def release_ha_agent_lock(self) -> bool:
        return self.sim_get_lock(agent_lock(self.nodename()), unlock=True)
