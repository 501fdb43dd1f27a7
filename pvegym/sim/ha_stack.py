"""The simulation with the whole HA stack: ``Simulation`` running the port of pve-ha-manager
(:mod:`pvegym.sim.ha`) — one CRM and one LRM per online node — on the cluster model's hardware
(:mod:`pvegym.sim.ha_model_env`). Selected by the scenario key ``ha_stack = "full"``: the
simulation then hands its round to an :class:`HAStack` (``commit``, the balancer's checks, the
scenario's manual commands) and keeps its physics.

A round at time ``t``: ``commit`` runs every CRM at ``t`` (the master's
:meth:`~pvegym.sim.ha.manager.Manager.manage`: LRM results, CRM commands, ``load_balance`` — which
the committed motion answers —, the service state machine, the manager status) and reads the
simulation's service table back from the manager status. ``advance`` runs the round's physics
``(t, t + 10]``: first the motions' part (the jobs queued earlier run on, and those that end in
the round end), then every node's LRM at ``t + phase[n]`` (:meth:`HAStack.lrm_ticks`: it collects
the workers whose motion ended by its poll and forks those of new commands; a motion queued onto
an idle pipeline runs over the rest of the round at once, so the same tick's polls see it end),
then the cluster's part. ``receive`` queues scenario events as CRM commands
(``migrate``/``relocate``) for the next round.

Against the model stack (``ha_stack = "model"``, :mod:`pvegym.sim.motions`): a job starts at its
node's LRM tick after the CRM round that requested it (the model: a seeded offset after the round,
drawn per job); the CRM sees its end at the first round after the tick that collected it — the
tick in the round of the end if the end falls within that tick's 8 s of polls (and the round),
else the next tick — where the model's CRM sees it at the first round after the end. A motion
therefore holds the balancer up to one round longer, a job behind a running one (a bundle) starts
in the round after the first ends, and the HA stack starts its services in the episode's first
round (the CRM takes the manager lock and adds them, the LRMs take their agent locks).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pvegym.sim.ha.crm import CRM
from pvegym.sim.ha.lrm import LRM
from pvegym.sim.ha.tools import QUIET_SERIAL_KEY
from pvegym.sim.ha_model_env import CommittedMotion, ModelCFS, ModelHAEnv
from pvegym.sim.view import STARTED, ClusterView, Motion

_MOVING = ("migrate", "relocate")


class HAStack:
    """The daemons of one episode: a CRM and an LRM per online node, their shared file system,
    and the balancer that answers with the committed motion.

    ``sim`` is the :class:`~pvegym.sim.simulation.Simulation` (not imported: it imports this
    module); the stack reads its cluster and service table and writes the table back
    (``svc_state``, ``svc_place``, ``svc_started``, ``_ha_active``) after every CRM round.
    """

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        cl = sim.cluster
        self.committed = CommittedMotion()
        #: the view ``load_balance`` passes when none was built this round (see
        #: :meth:`ModelHAEnv.balancer_view`)
        self.stub_view: ClusterView | None = None
        self._synced_serial: Any = None
        #: the round whose LRM ticks run now, ``(t0, t1)`` s
        self.ticking: tuple[float, float] | None = None
        self.cfs = ModelCFS(sim)
        rng = np.random.default_rng(np.random.SeedSequence(sim.seed).spawn(4)[3])
        phases = rng.uniform(0.0, sim.scenario.migration.lrm_delay_max_s, cl.n_nodes).tolist()
        self.crms: list[tuple[ModelHAEnv, CRM]] = []
        lrms: list[tuple[float, str, ModelHAEnv, LRM]] = []
        for i, node in enumerate(cl.node_names):
            if not cl.node_online[i]:
                continue  # a node that is off runs no daemon
            crm_env = ModelHAEnv(sim, self, node, "crm")
            crm_env.balancer = self.committed
            self.crms.append((crm_env, CRM(crm_env)))
            lrm_env = ModelHAEnv(sim, self, node, "lrm")
            lrms.append((phases[i], node, lrm_env, LRM(lrm_env)))
        lrms.sort(key=lambda x: (x[0], x[1]))
        #: ``(phase s, env, LRM)`` in tick order
        self.lrms = [(phase, env, lrm) for phase, _, env, lrm in lrms]

    def answer(self, g: int, target: int, motion: Motion | None = None) -> None:
        """The answer of this round's ``load_balance``: guest ``g`` to node ``target`` (the
        policy's ``motion`` itself when given: it carries the imbalances for the log)."""
        cl = self.sim.cluster
        self.committed.pending = motion or Motion(cl.sids[g], cl.node_names[target])

    def queue_command(self, g: int, target: int) -> None:
        """A scenario event: the CRM command ``qm migrate``/``pct migrate`` of an HA guest queues
        (``ha-manager crm-command``), read by the master's next round; the balancer waits."""
        cl = self.sim.cluster
        sid = cl.sids[g]
        task = "migrate" if sid.startswith("vm:") else "relocate"
        self.cfs.crm_commands.append(f"{task} {sid} {cl.node_names[target]}")
        self.cfs.bump()
        self.sim._ha_active = True

    def round(self) -> None:
        """Every CRM at the simulation's time, then the service table read back."""
        sim = self.sim
        t = sim.t
        for env, crm in self.crms:
            env.start_at(t)
            crm.do_one_iteration()
        self.committed.pending = None  # no master asked (e.g. still taking the lock)
        self.sync()
        sim._results = []

    def lrm_ticks(self, t0: float, t1: float) -> None:
        """Every LRM at its tick ``t0 + phase`` of the round ``(t0, t1]`` (s), in tick order
        (``Simulation.advance`` calls it once the round's motions have run)."""
        self.ticking = (t0, t1)
        for phase, env, lrm in self.lrms:
            env.start_at(t0 + phase)
            lrm.do_one_iteration()
        self.ticking = None

    def motion_queued(self) -> None:
        """A worker queued a motion (:class:`~pvegym.sim.motions.Job`): alone in the pipeline,
        it runs over the rest of the round now, so that the worker's polls see when it ends."""
        sim = self.sim
        if self.ticking is not None and len(sim.jobs) == 1:
            sim.run_new_motion(*self.ticking)

    def sync(self) -> None:
        """The simulation's service table (states, nodes, targets) from the manager status,
        when the Manager wrote a new serial (a round that may have changed a state)."""
        ms = self.cfs.manager_status
        serial = ms.get(QUIET_SERIAL_KEY, self)
        if serial is self._synced_serial or serial == self._synced_serial:
            return
        self._synced_serial = serial
        sim = self.sim
        ss = ms.get("service_status") or {}
        sids, node_index = sim.cluster.sids, sim.cluster.node_index
        svc_state, started = sim.svc_state, sim.svc_started
        svc_node, svc_target = sim.svc_node, sim.svc_target
        active = False
        for g in sim._ha_list:
            sd = ss.get(sids[g])
            if sd is None:
                continue
            state = sd.get("state") or ""
            svc_state[g] = state
            started[g] = state == STARTED
            node = sd.get("node")
            if node in node_index:
                svc_node[g] = node_index[node]
            target = sd.get("target")
            moving = state in _MOVING
            svc_target[g] = node_index[target] if moving and target in node_index else -1
            cmd = sd.get("cmd")
            if moving or (cmd and cmd[0] in _MOVING):
                active = True
        sim._view_states = None
        sim._ha_active = active or bool(self.cfs.crm_commands)
