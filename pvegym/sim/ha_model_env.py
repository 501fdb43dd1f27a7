"""The cluster model as the HA stack's hardware: an :class:`~pvegym.sim.ha.env.HAEnv` over a
:class:`~pvegym.sim.simulation.Simulation` (scenario key ``ha_stack = "full"``).

Upstream's regression hardware (:mod:`pvegym.harness.sim_env`) gives the port of pve-ha-manager
(:mod:`pvegym.sim.ha`) a file system of JSON files, scripted power and network commands and guests
that move in 2 s. This module gives it the cluster model instead:

* **time** — the simulation's time. The CRM of every node runs at the round time ``t`` (the
  Manager's ``manage`` once per round, 10 s, upstream's cadence); the LRM of node *n* runs once a
  round at ``t + phase[n]`` (a seeded phase in ``[0, lrm_delay_max_s)``, fixed per episode, as a
  node's LRM loop keeps its own rhythm), inside the round's physics once the motions' part of it
  has run (:mod:`pvegym.sim.ha_stack`). ``sleep`` inside an iteration advances the daemon's own
  clock (the LRM's ``run_workers`` polls its workers each second for 8 s).
* **cluster file system** — :class:`ModelCFS`: the manager status, each LRM's status and the CRM
  command queue are kept as the objects written (no daemon keeps one across another daemon's
  write, so a reader sees what a JSON round trip would give); the service config is built from the
  scenario (every HA guest, ``started`` or ``stopped``) and follows its guests' moves.
* **membership** — a node is a member while its power and its network are on (``online`` as
  configured at the start; the scenario's ``power-*`` and ``network-*`` events change them,
  :class:`ModelCFS`); the cluster is quorate while more than half are members, and without
  quorum no node is (``Sim/Hardware.pm`` ``$compute_node_info``, corosync's votequorum). A node
  outside the quorate partition sees no quorum: its daemons cannot renew their locks. The
  daemons run on powered nodes only.
* **locks and watchdog** — the cluster-wide locks of pmxcfs, renewed by their holder and free
  :data:`LOCK_TIMEOUT` (120 s) after the last renewal (``Env/PVE2.pm`` ``get_pve_lock``:
  ``$retry_timeout = 120; # hardcoded lock lifetime limit from pmxcfs``); a watchdog per daemon
  that expires :data:`WATCHDOG_TIMEOUT` (60 s) after its last update (``watchdog-mux.c``
  ``CLIENT_WATCHDOG_TIMEOUT``) and then resets its node: the stack powers the node off at the
  first round boundary after the expiry (:meth:`ModelCFS.expired_nodes`). Fencing is the port's:
  the master acknowledges it when it gets the node's agent lock (``NodeStatus.pm``), i.e. at
  least 120 s after the node's LRM last renewed it — after its watchdog reset the node.
* **usage statistics** — what the balancer's view shows (pvestatd's samples of the telemetry):
  services ``maxcpu``/``maxmem`` and ``cpu``/``mem``, nodes their capacities and sampled usage.
* **workers** — ``fork_worker``/``waitpid`` run the LRM's jobs as generators
  (:mod:`pvegym.sim.ha.resources`). A move is the model's motion (:mod:`pvegym.sim.motions`): the
  plugin queues a :class:`~pvegym.sim.motions.Job` that ``Simulation`` runs (precheck, local
  resources, huge pages, the live migration of :mod:`pvegym.sim.migration`, a container's
  downtime; over the rest of the round at once, beside the motions other workers run) and yields
  until the job ended by the worker's time; the worker's exit code is its outcome.
* **balancer** — ``new_balancer`` answers the Manager's ``load_balance`` with the motion the
  policy or environment committed for this round (:class:`CommittedMotion`).

The quiescence token changes whenever the config, the CRM command queue, an LRM's mode or results,
or a guest's running state changes: a round with none of them (and no job) is the Manager's and the
LRMs' steady state (:meth:`~pvegym.sim.ha.manager.Manager.manage`).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Hashable
from typing import TYPE_CHECKING, Any, Protocol

from pvegym.sim.cluster_locks import LOCK_TIMEOUT as LOCK_TIMEOUT  # re-exported (tests)
from pvegym.sim.cluster_locks import SimLockEnv
from pvegym.sim.ha.groups import Groups
from pvegym.sim.ha.perl import PerlDie
from pvegym.sim.ha.resources import AgentEnv, Job, ResourcePlugin
from pvegym.sim.ha.rules import Rules
from pvegym.sim.ha_control import SimulationPort as Simulation
from pvegym.sim.motions import MIGRATE, RELOCATE
from pvegym.sim.motions import Job as MotionJob
from pvegym.sim.view import Balancer, ClusterView, Motion, guest_cpu_cap

if TYPE_CHECKING:
    from pvegym.sim.scenario import Scenario


class Stack(Protocol):
    """What the daemons' environments use of the :class:`~pvegym.sim.ha_stack.HAStack` (not
    imported: it imports this module)."""

    cfs: ModelCFS
    #: the view ``load_balance`` passes when none was built this round
    stub_view: ClusterView | None

    def motion_queued(self) -> None: ...


#: s, watchdog-mux's client timeout (``src/watchdog-mux.c`` ``CLIENT_WATCHDOG_TIMEOUT``): a daemon
#: that armed the watchdog and did not update it for this long resets its node
WATCHDOG_TIMEOUT = 60.0

#: the datacenter settings of the model: the scenario's CRS mode, the balancer on (its policy is
#: the environment's), upstream's defaults otherwise
_CRS_DEFAULTS = {"ha-auto-rebalance": 1}


def rules_config_text(scenario: Scenario) -> str:
    """The scenario's node- and resource-affinity rules as ``rules.cfg`` (section config)."""
    out: list[str] = []
    for i, na in enumerate(scenario.node_affinity):
        nodes = ",".join(f"{n}:{p}" if p else n for n, p in na.nodes.items())
        out += [f"node-affinity: na{i}", f"\tnodes {nodes}"]
        out += [f"\tresources {','.join(na.resources)}"]
        if na.strict:
            out.append("\tstrict 1")
        out.append("")
    for i, ra in enumerate(scenario.resource_affinity):
        out += [f"resource-affinity: ra{i}", f"\taffinity {ra.affinity}"]
        out += [f"\tresources {','.join(ra.resources)}", ""]
    return "\n".join(out)


def _bytes(x: float) -> int:
    """Memory as pvestatd reports it: whole bytes (the CRS scheduler takes a ``usize``); NaN
    (a disabled telemetry field) reads 0."""
    return 0 if math.isnan(x) else int(x)


def _cores(x: float) -> float:
    return 0.0 if math.isnan(x) else x


class CommittedMotion:
    """The Manager's balancer: answers ``load_balance`` with the motion committed for the round
    (by ``Simulation.commit``), once."""

    name = "committed"

    def __init__(self) -> None:
        self.pending: Motion | None = None
        #: the motion ``load_balance`` took this round (``HAStack.round`` clears it): a motion
        #: no master took — a Manager created this round resets its balancer — is retracted
        self.taken: Motion | None = None

    def reset(self, seed: int | None = None) -> None:
        self.pending = None

    def decide(self, view: ClusterView) -> Motion | None:
        return self.take()

    def take(self) -> Motion | None:
        """The committed motion, taken (``decide`` without a view: the engine's
        ``load_balance`` queued it)."""
        motion, self.pending = self.pending, None
        if motion is not None:
            self.taken = motion
        return motion


class ModelCFS:
    """The shared state of the cluster's daemons: the cluster file system, locks and watchdogs,
    plus the versions the quiescence token is made of."""

    def __init__(self, sim: Simulation) -> None:
        cl = sim.cluster
        scn = sim.scenario
        self.manager_status: dict[str, Any] = {}
        self.lrm_status: dict[str, dict[str, Any]] = {}
        self.lrm_keys: dict[str, Hashable] = {}
        self.crm_commands: list[str] = []
        self.locks: dict[str, dict[str, Any]] = {}
        self.watchdogs: dict[str, float] = {}
        #: sid → config (upstream's defaults applied); node follows the guest's moves
        self.service_config: dict[str, dict[str, Any]] = {}
        for g in sim.ha_idx.tolist():
            sid, spec = cl.sids[g], cl.guests[g]
            typ, _, name = sid.partition(":")
            self.service_config[sid] = {
                "node": cl.node_names[int(cl.home[g])],
                "state": "started" if spec.state == "started" else "stopped",
                "type": typ,
                "name": name,
                "failback": 1,
                "max_restart": 1,
                "max_relocate": 1,
            }
        rules = Rules.parse_config("rules.cfg", rules_config_text(scn))
        for rule in rules["ids"].values():
            Rules.set_rule_defaults(rule)
        self.rules = rules
        self.groups = Groups.parse_config("groups", "")
        self.datacenter: dict[str, dict[str, Any]] = {
            "ha": {},
            "crs": {"ha": scn.crs_mode, **_CRS_DEFAULTS},
        }
        #: the hardware: each node's power and network (``Sim/Hardware.pm``'s hardware status)
        self.power: dict[str, bool] = dict(
            zip(cl.node_names, (bool(x) for x in cl.node_online.tolist()), strict=True)
        )
        self.network: dict[str, bool] = dict(self.power)
        self.node_info: dict[str, dict[str, Any]] = {}
        self.quorate = False
        self.membership()
        #: bumped on every change of the service config or the CRM command queue
        self.config_version = 0

    def bump(self) -> None:
        self.config_version += 1

    def is_member(self, node: str) -> bool:
        """Whether ``node`` is powered with its network on (it reaches the others)."""
        return self.power[node] and self.network[node]

    def membership(self) -> None:
        """The cluster's membership from power and network: a member has both on; quorate while
        more than half of the nodes are members, and without quorum no node is online
        (``Sim/Hardware.pm`` ``$compute_node_info``)."""
        member = {n: self.is_member(n) for n in self.power}
        self.quorate = sum(member.values()) > len(member) // 2
        self.node_info = {n: {"online": on and self.quorate} for n, on in member.items()}

    def expired_nodes(self, now: float) -> list[str]:
        """The powered nodes one of whose watchdogs expired by ``now`` (s): not updated for more
        than :data:`WATCHDOG_TIMEOUT` s (the hardware watchdog then resets the node)."""
        out: list[str] = []
        for wfh, t in self.watchdogs.items():
            node = wfh.partition("/")[0]
            if now - t > WATCHDOG_TIMEOUT and self.power[node] and node not in out:
                out.append(node)
        return sorted(out)

    def drop_watchdogs(self, node: str) -> None:
        """A node that powers off loses its watchdogs (``watchdog_reset_nolock``)."""
        for wfh in [w for w in self.watchdogs if w.partition("/")[0] == node]:
            del self.watchdogs[wfh]

    def change_service_location(self, sid: str, new_node: str) -> None:
        self.service_config[sid]["node"] = new_node
        self.bump()


class ModelHAEnv(SimLockEnv):
    """One node's environment for one daemon (``crm`` or ``lrm``) over the cluster model."""

    def __init__(self, sim: Simulation, stack: Stack, nodename: str, log_id: str) -> None:
        self.sim = sim
        self.stack = stack
        self.cfs: ModelCFS = stack.cfs
        self._nodename = nodename
        self.log_id = log_id
        self.cur_time = 0.0
        self.loop_delay = 0.0
        self.balancer: CommittedMotion | None = None
        self._plugins: dict[str, ResourcePlugin] = {}

    # ------------------------------------------------------------------ identity, time, log
    def nodename(self) -> str:
        return self._nodename

    def get_time(self) -> float:
        return self.cur_time + self.loop_delay

    def sleep(self, delay: float) -> None:
        self.loop_delay += delay

    def sleep_until(self, end_time: float) -> None:
        now = self.cur_time + self.loop_delay
        if now < end_time:
            self.loop_delay += end_time - now

    def start_at(self, t: float) -> None:
        """The next iteration starts at ``t`` (s): the daemon's clock is set, its delay dropped."""
        self.cur_time = t
        self.loop_delay = 0.0

    def write_log(self, level: str, msg: str) -> None:
        if level == "debug":
            return
        msg = msg[:-1] if msg.endswith("\n") else msg
        self.sim.log_line(self.get_time(), f"{self._nodename}/{self.log_id}: {msg}")

    def quiescence_token(self) -> Hashable | None:
        """Config and command-queue version, the guests' running state (OOM kills) and, for the
        CRM, every LRM's mode and results."""
        cfs = self.cfs
        base = (cfs.config_version, len(self.sim.killed))
        if self.log_id == "lrm":
            return base
        return (base, tuple(cfs.lrm_keys.items()))

    # ------------------------------------------------------------------ cluster file system
    def read_manager_status(self) -> dict[str, Any]:
        return self.cfs.manager_status

    def write_manager_status(self, status: dict[str, Any]) -> None:
        self.cfs.manager_status = status

    def read_lrm_status(self, node: str | None = None) -> dict[str, Any]:
        return self.cfs.lrm_status.get(self._nodename if node is None else node, {})

    def write_lrm_status(self, status: dict[str, Any]) -> None:
        cfs, node = self.cfs, self._nodename
        cfs.lrm_status[node] = status
        results = status.get("results") or {}
        key: Hashable = (status.get("mode"), status.get("state"))
        if results:  # by service: the uids are new every round a service's start is confirmed
            items = sorted((r["sid"], r["state"], r["exit_code"]) for r in results.values())
            key = (key, *items)
        cfs.lrm_keys[node] = key

    def is_node_shutdown(self) -> tuple[bool, bool]:
        return False, False

    def queue_crm_commands(self, cmd: str) -> None:
        self.cfs.crm_commands.append(cmd)
        self.cfs.bump()

    def any_pending_crm_command(self) -> bool:
        return bool(self.cfs.crm_commands)

    def read_crm_commands(self) -> str:
        cfs = self.cfs
        if not cfs.crm_commands:
            return ""
        cmds, cfs.crm_commands = cfs.crm_commands, []
        cfs.bump()
        return "\n".join(cmds)

    def read_service_config(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        """The config itself (not a copy: no daemon of the model changes it — the groups
        migration that would is a no-op without groups); its digest is its version."""
        return self.cfs.service_config, str(self.cfs.config_version)

    def update_service_config(self, changes: dict[str, dict[str, Any]]) -> None:
        conf = self.cfs.service_config
        for sid in sorted(changes):
            if sid not in conf:
                raise PerlDie(f"no such resource '{sid}'")
            conf[sid].update(changes[sid].get("param") or {})
            for k in str(changes[sid].get("delete") or "").split(","):
                if k:
                    conf[sid].pop(k, None)
        self.cfs.bump()

    def write_service_config(self, conf: dict[str, dict[str, Any]]) -> None:
        self.cfs.service_config = conf
        self.cfs.bump()

    def read_rules_config(self) -> Any:
        return self.cfs.rules

    def write_rules_config(self, rules: Any) -> None:
        self.cfs.rules = rules
        self.cfs.bump()

    def read_group_config(self) -> Any:
        return self.cfs.groups

    def delete_group_config(self) -> None:
        raise PerlDie("failed to remove group config: No such file or directory")

    def get_datacenter_settings(self) -> dict[str, Any]:
        return self.cfs.datacenter

    # ------------------------------------------------------------------ membership, locks
    def get_node_info(self) -> tuple[dict[str, dict[str, Any]], bool]:
        """The membership and this node's own quorum (``check_cfs_quorum``: a node cut off from
        the quorate partition has none)."""
        return self.cfs.node_info, self.quorate()

    def quorate(self) -> bool:
        """This node is in the quorate partition (``PVE2.pm`` ``quorate``)."""
        return bool(self.cfs.node_info[self._nodename]["online"])

    def cluster_state_update(self) -> bool:
        return True

    def lock_table(self) -> dict[str, Any]:
        """The one lock table (:class:`~pvegym.sim.cluster_locks.SimLockEnv`), in the shared
        file system."""
        return self.cfs.locks

    # ------------------------------------------------------------------ watchdog
    def watchdog_open(self) -> str:
        wfh = f"{self._nodename}/{self.log_id}"
        self.cfs.watchdogs[wfh] = self.get_time()
        return wfh

    def watchdog_update(self, wfh: str) -> None:
        self.cfs.watchdogs[wfh] = self.get_time()

    def watchdog_close(self, wfh: str) -> None:
        self.cfs.watchdogs.pop(wfh, None)

    # ------------------------------------------------------------------ scheduler inputs
    def get_basic_service_stats(self) -> dict[str, dict[str, Any]]:
        return {
            sid: {
                "node": cd["node"],
                "state": cd["state"],
                "running": cd["state"] == "started",
                "usage": {},
            }
            for sid, cd in self.cfs.service_config.items()
        }

    def get_static_service_stats(self) -> dict[str, dict[str, Any]]:
        stats = self.get_basic_service_stats()
        sim = self.sim
        maxcpu, maxmem = sim.views.guest_maxcpu.tolist(), sim.views.guest_maxmem.tolist()
        for i, sid in enumerate(sim.ha_sids):
            stats[sid]["usage"] = {"maxcpu": maxcpu[i], "maxmem": _bytes(maxmem[i])}
        return stats

    def get_dynamic_service_stats(self) -> dict[str, dict[str, Any]]:
        """The view's guest cpu (cores) and mem (bytes): pvestatd's samples (a field the scenario
        disables reads 0). A guest without a CPU limit has the RRD's ``maxcpu``, its node's CPUs
        (pve-container ``vmstatus``, read by ``PVE2.pm`` ``get_dynamic_service_stats``)."""
        stats = self.get_static_service_stats()
        view = self.sim.view
        cpu, mem = view.guest_cpu.tolist(), view.guest_mem.tolist()
        for i, sid in enumerate(view.sids):
            stats[sid]["usage"].update(cpu=_cores(cpu[i]), mem=_bytes(mem[i]))
            if stats[sid]["usage"]["maxcpu"] == 0:
                stats[sid]["usage"]["maxcpu"] = float(guest_cpu_cap(view)[i])
        return stats

    def get_static_node_stats(self) -> dict[str, dict[str, Any]]:
        cl = self.sim.cluster
        maxcpu, maxmem = cl.node_maxcpu.tolist(), cl.node_maxmem.tolist()
        return {
            n: {"maxcpu": maxcpu[i], "maxmem": _bytes(maxmem[i])}
            for i, n in enumerate(cl.node_names)
        }

    def get_dynamic_node_stats(self) -> dict[str, dict[str, Any]]:
        """The view's node cpu (cores) and mem (bytes) with the capacities."""
        stats = self.get_static_node_stats()
        view = self.sim.view
        cpu, mem = view.node_cpu.tolist(), view.node_mem.tolist()
        for i, n in enumerate(view.node_names):
            stats[n].update(cpu=_cores(cpu[i]), mem=_bytes(mem[i]))
        return stats

    def get_node_version(self, node: str) -> str | None:
        return "9.0.0~16"  # a cluster with HA rules (pve-manager ≥ 9.0.0~16)

    # ------------------------------------------------------------------ resources
    def resource_plugin(self, service_type: str) -> ResourcePlugin | None:
        if service_type not in ("vm", "ct"):
            return None
        plugin = self._plugins.get(service_type)
        if plugin is None:
            plugin = self._plugins[service_type] = ModelGuest(self.sim, self.stack, service_type)
        return plugin

    def steal_service(self, sid: str, current_node: str, new_node: str) -> None:
        """Recovery of a fenced node's service: its config moves to ``new_node``, and so does the
        (stopped) guest of the model — the new node's LRM starts it there."""
        self.cfs.change_service_location(sid, new_node)
        self.sim.place_stopped_guest(self.sim.cluster.guest_index[sid], new_node, self.get_time())

    # ------------------------------------------------------------------ workers, balancer
    def get_max_workers(self) -> int:
        return 4  # datacenter.cfg ``max_workers`` default

    def fork_worker(self, job: Job[int]) -> Any:
        """Start the job now: it runs to its first wait (a motion queued for the physics)."""
        return Worker(job)

    def waitpid(self, handle: Any) -> int | None:
        worker: Worker = handle
        return worker.poll(self.get_time())

    def new_balancer(self) -> Balancer | None:
        """The stack's :class:`CommittedMotion` (set on the CRM environments only)."""
        return self.balancer

    def balancer_view(self, manager: object) -> ClusterView | None:
        """The round's view when a motion was committed (the one the policy decided on);
        otherwise the committed-motion balancer does not look at it, and the last view built
        serves (no telemetry copy for a round without a motion)."""
        view = self.sim.built_view
        if view is None:
            view = self.stack.stub_view
            if view is None:
                view = self.stack.stub_view = self.sim.view
        return view


class Worker:
    """A forked LRM worker: its job runs until it waits for a motion of the model (which the
    physics ends at ``t_end``); ``poll`` resumes it once the motion ended by the poll's time."""

    __slots__ = ("job", "status", "waiting")

    def __init__(self, job: Job[int]) -> None:
        self.job = job
        self.status: int | None = None
        self.waiting: MotionJob | None = None
        self._resume()

    def _resume(self) -> None:
        try:
            self.waiting = next(self.job)
        except StopIteration as stop:
            self.status = (int(stop.value) & 0xFF) << 8
            self.waiting = None

    def poll(self, now: float) -> int | None:
        """The wait status once the job returned (its motion ended by ``now``), else ``None``."""
        while self.status is None:
            w = self.waiting
            if w is not None and (w.t_end is None or w.t_end > now):
                return None
            self._resume()
        return self.status


class ModelGuest:
    """The resource agent of a model guest (``vm`` or ``ct``): runs where the model has it; a
    move is a motion of the model (:class:`pvegym.sim.motions.Job`)."""

    def __init__(self, sim: Simulation, stack: Stack, service_type: str) -> None:
        self.sim = sim
        self.stack = stack
        self.cfs: ModelCFS = stack.cfs
        self.service_type = service_type

    def type(self) -> str:
        return self.service_type

    def exists(self, id: str) -> bool:
        return f"{self.service_type}:{id}" in self.sim.cluster.guest_index

    def _guest(self, id: str) -> int:
        return self.sim.cluster.guest_index[f"{self.service_type}:{id}"]

    def check_running(self, haenv: AgentEnv, id: str) -> bool:
        """On this node and started in the config (an OOM-killed guest stays down in the model:
        restarting it is not modelled yet)."""
        sim, g = self.sim, self._guest(id)
        node = sim.cluster.node_names[int(sim.cluster.node[g])]
        return node == haenv.nodename() and bool(sim.cluster.running[g])

    def start(self, haenv: AgentEnv, id: str) -> None:
        self.sim.set_running(self._guest(id), True)

    def shutdown(self, haenv: AgentEnv, id: str, timeout: Any = None) -> None:
        self.sim.set_running(self._guest(id), False)

    def migrate(
        self, haenv: AgentEnv, id: str, target: str, online: bool
    ) -> Generator[MotionJob, Any, bool]:
        """The model's motion of the guest to ``target``: queued for the physics at the worker's
        time, waited for; on success the config follows the guest. A guest that does not run (the
        Manager's migrate of a stopped service, an offline migrate) moves at once, as the model
        stack's ``next_state_stopped`` moves it: no motion, no downtime or migration time."""
        sim, g = self.sim, self._guest(id)
        sid = f"{self.service_type}:{id}"
        cl = sim.cluster
        if not cl.running[g]:
            cl.node[g] = cl.node_index[
                target
            ]  # as ModelCRM.next_states moves it (no KSM/telemetry reset)
            self.cfs.change_service_location(sid, target)
            haenv.log("info", f"service {sid} - moved offline to node '{target}'")
            return True
        kind = MIGRATE if online and self.service_type == "vm" else RELOCATE
        if online and self.service_type == "ct":
            haenv.log("warn", "unable to live migrate running container, fallback to relocate")
        haenv.log("info", f"service {sid} - start {kind} to node '{target}'")
        now = haenv.get_time()  # type: ignore[attr-defined]
        source = int(cl.node[g])
        job = MotionJob(g, sid, source, cl.node_index[target], kind, sim.t, now)
        job.move_id = sim.moves.take_pending(g)
        sim.jobs.append(job)
        self.stack.motion_queued()
        while job.t_end is None or job.t_end > haenv.get_time():  # type: ignore[attr-defined]
            yield job  # the physics has not ended it by the worker's time
        if not job.ok:
            return False
        self.cfs.change_service_location(sid, target)
        haenv.log("info", f"service {sid} - end {kind} to node '{target}'")
        return True

    def remove_locks(
        self, haenv: AgentEnv, id: str, locks: list[str], service_node: str
    ) -> str | None:
        return None
