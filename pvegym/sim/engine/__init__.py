"""The compiled HA engine: pve-ha-manager 5.2.0's semantics over arrays (issue 31).

The line-by-line port in :mod:`pvegym.sim.ha` is the executable specification; this package
computes the same rounds with numba (as :mod:`pvegym.sim.kernel`: ``njit(cache=True)``, no
fastmath, integer state, loops in upstream's sorted order, so it is deterministic and
bit-for-bit reproducible) and never calls the port. :mod:`~pvegym.sim.engine.differential` proves
it equal to the port on random clusters (``scripts/engine_diff.py``).

Design
------
* **State is arrays with a leading cluster axis**, so N clusters share one call (the batched
  vector environment): services ``svc[c, s, F_*]`` (int64: state, node, target, uid, queued
  command, running, maintenance node, timeout, ``failed_nodes`` packed four bits a node, the
  service config's requested state and node, type, ``max_relocate``, ``failback``, the LRM's
  result, the nodes its usage is counted on), nodes ``nodes[c, n, N_*]`` (state, this round's
  membership, LRM mode and agent lock, the maintenance request, the usage count), the nodes'
  last-online times ``last_online[c, n]`` (s; NaN: never; the last column is the undefined
  node's) and cluster scalars ``clu[c, K_*]`` (disarm, uid counter, settings, event count).
  The LRMs' state is in arrays of their own (:mod:`~pvegym.sim.engine.lrm`): one daemon per node
  ``lnodes[c, n, L_*]``, the worker table ``lwork[c, n, s, W_*]``, results and restart counters
  ``lres[c, n, s, R_*]``, the per-service LRM config ``lcfg[c, s, C_*]``, ``lclu[c, LK_*]``.
  Services and nodes are indexed in upstream's iteration order (sorted ids). Layout and codes:
  :mod:`~pvegym.sim.engine.codes`. The rules and CRS modes have arrays of their own (``rx``, the
  last section of ``codes``): the compiled rules ``rprio[c, slot, s, n]`` (node priorities) and
  ``rpair[c, slot, s, s2]`` (partner bits) in an active and a pending slot, cluster scalars
  ``rk[c, RK_*]``, per-node and per-service scratch and inputs, the guests' and nodes' usage
  ``fsvc``/``fnode`` (float64).
* **Integer codes** for service, config, node and LRM states, commands and exit codes.
* **Events, not strings**: each round writes event rows ``evbuf[c, i]`` (kind and integer
  arguments); :func:`~pvegym.sim.engine.events.format_events` turns them into upstream's log lines
  only where a log is wanted.
* **Inputs per round** are the hardware's: the time, each node's membership, LRM mode and whether
  its agent lock can be taken, each service's LRM result (exit code and the uid it answers), the CRM
  command queue (``cmds[c, q] = (kind, a, b)``), the balancer's motion (``clu[c, K_MOTION_*]``) and
  the service config. This is what the CRM
  master reads through ``PVE::HA::Env``; the outputs are the manager status (service and node
  status, node requests, disarm) and the config changes the master writes (recovery's
  ``steal_service``, a stop command's requested state). With the LRMs
  (:func:`~pvegym.sim.engine.lrm.lrm_round` after each CRM round), the LRM modes and results are
  no longer inputs: :func:`~pvegym.sim.engine.lrm.publish` reads them from the LRM status each
  LRM wrote; the LRMs' inputs are whether each daemon runs (a new one after a boot or an exit:
  :func:`~pvegym.sim.engine.lrm.reset_node`), is quorate and can take its agent lock, its clock,
  a shutdown request and the datacenter's shutdown policy, ``max_workers``, and when a forked job
  ends with which exit code (``waitpid``'s answer: what a job does is the hardware's).

Coverage (what the differential check proves identical)
-------------------------------------------------------
:mod:`~pvegym.sim.engine.crm` — the CRM master's round (``Manager::manage``): node states
(online/maintenance/unknown/fence with the fence delay and fencing by agent lock), new and stale
services, the basic-mode node usage, every CRM command (migrate, relocate, stop, node maintenance
on/off, disarm freeze/ignore, arm), ``handle_disarm`` with deferral, the whole service state
machine (request_start with ``ha-rebalance-on-start``, request_start_balance, started with the
relocate policy and ``max_relocate``, migrate, relocate, request_stop, stopped, fence, recovery with
CRS placement, freeze, error) and ``select_service_node`` (none / best-score / try-next, failback,
maintenance fallback), repeated until no state changes; ``load_balance`` with the balancer's
answer as an input (the motion queued and logged as upstream's; the balancer itself — a policy
deciding on a :class:`~pvegym.sim.view.ClusterView` — stays outside the engine).

:mod:`~pvegym.sim.engine.lrm` — every node's LRM daemon (``LRM::do_one_iteration``, checked with
the CRM by ``scripts/engine_diff.py --lrm``): the startup write, the states wait_for_agent_lock /
active / maintenance / lost_agent_lock and their changes (fence requests, the agent lock and its
watchdog, maintenance and disarm modes from the manager status, the 60 idle rounds — a directed
example, as random ones of 60 rounds do not reach it), the LRM
status it writes (mode and results, read by the CRM's next round), ``manage_resources`` in the
service status's order, the worker table (a request not queued twice, ``stopped`` always,
``max_workers`` forked at once, the most tried first, every call of ``run_workers`` with its nine
polls), each event stamped with the daemon's clock (the time of the port's line: the
iteration's start plus its polls and lock retries), the results pruned to the uids the manager
knows, the restart policy (``max_restart``, then the CRM's relocation with ``max_relocate``), and
shutdown requests — an LRM restart, a node
reboot or shutdown — under each shutdown policy (conditional, freeze, failover, migrate): the
``restart``/``shutdown``/``maintenance`` modes they set, a node shutdown's stop jobs, the
daemon's exit from each state (with the 90 s a lost lock may last under an LRM restart).

:mod:`~pvegym.sim.engine.rules` — node-affinity rules (strict and non-strict, priorities) and
resource-affinity rules (positive, negative), enabled or disabled, and HA groups (``restricted``,
``nofailback``, priorities): compiled outside the kernel as the Manager does before placing
(the groups' in-memory migration, every feasibility check of ``Rules::transform`` with its
"Drop rule" lines, the merged, implicit and extended rules, ``Rules::compile``), taken over in the
kernel exactly when the port recompiles (first round, a changed node list, a changed config),
and applied in ``select_service_node`` (allowed and preferred nodes, the negative partners' nodes
removed, the positive partners' majority node, failback) for start, rebalance-on-start, relocation
and recovery, and in ``queue_resource_motion`` (refused onto a negative partner's node, positive
partners queued with the service) for commands and the balancer's motion; the persistent groups
migration (``try_persistent_group_migration``: cooldown, every check with its lines, the configs
rewritten). :mod:`~pvegym.sim.engine.crs` — the static and dynamic CRS modes' scores (TOPSIS over
the configured sizes, or over the measured usage plus the services not yet running, bit for bit:
the port's summation order is kept), the first round's ``using scheduler mode`` line and the
scheduler's refusal of a service whose target is its current node.

In the simulation: ``ha_stack = "engine"`` (:mod:`pvegym.sim.engine_stack`) runs this round as
the CRM master's, with the port's LRMs and CRM daemon around it on the model's hardware;
``scripts/engine_diff.py --scenarios`` compares whole episodes with the full stack.

Not yet: in the LRM, ``max_workers = 0`` (jobs run in place), a failing fork, a job killed by a
signal or failing to execute (exit status -1; it would read as ``NO_RESULT``), an unknown shutdown
policy; outside the differential check nothing runs the compiled CRM and LRMs together yet (a round
is ``lrm.publish``, ``crm.manage``, ``lrm.lrm_round`` in turn; the engine stack still uses the
port's LRMs, and places by the basic scheduler without rules: it does not pass the rules and CRS
arrays yet. A job's end may fall on any poll (``W_DONE_AT``) and the kernel reports each fork's
time (``W_FORKED_AT``), but on the model's hardware a job can end within the very ``run_workers``
call that forked it — a start or stop at once, a short motion within the polls — and a motion's end
is known only once its fork queued it at its time, so the driver must re-run the iteration from its
saved state with each end learnt (or the kernel stop at a fork); and the kernel does not yet report
when it took and released the agent lock, which the lock table, the watchdog and the ``got lock``
line need); the groups migration's LRM states (``RN_LRM_STATE``) are an input even with the
compiled LRM; nodes leaving the membership (``gone``), CRM master failover, a failing cluster file
system, the quiet-round fast path (the port's steady state; the engine has none yet, so there is
nothing to check on and off); of the CRS: a change of mode at run time (``switching scheduler
mode``), the usage of guests that are not HA resources, the scheduler's failures (missing stats:
the host must give every guest's and node's; the port falls back to basic with a warning), the
views and scores a balancer needs (imbalance, migration candidates); of the rules: a group a
service names but the groups config lacks (refused by
:meth:`~pvegym.sim.engine.rules.RulesConfig.validate`), rule ids colliding with a group's
``ha-group-<id>``, priorities ≥ 2**62. The host must raise ``RK_CONFIG_CHANGED`` when the rules,
groups or service config change (the port recompiles on a changed digest: the model's environment
gives the service config one).

Without a quiet-round path every round gives each ``started`` service whose LRM result it read a
new uid, as upstream's ``next_state_started`` does ("ensure service gets started again if it went
unexpected down") and as the port does in every round that is not quiet (the differential check's
port has no quiescence token, so it renews in the same rounds, and its LRM comparison marks each
result current or stale by uid); so its LRMs check every service again every round. In the engine
stack that is what costs the port's LRMs their own quiet path (their memo keys on the manager
status's serial, new with every uid): ``tests/sim/test_engine_stack.py`` pins that the engine
renews in exactly the rounds the full stack without its quiescence token does.

Extending it
------------
Each new part follows the same steps: mirror the port's function (same order of loops and
events) over new columns of the arrays, add its inputs to :class:`~pvegym.sim.engine.differential.RoundInput`
and both sides' ``load``/``step``, let :class:`~pvegym.sim.engine.differential.History` exercise it,
and count it in the test's feature list; a mutant of one of its transitions must be reported. Next:
wiring the compiled LRM and the rules/CRS arrays into the engine stack (and the LRM states
the groups migration takes as inputs now, ``RN_LRM_STATE``, from the compiled LRM).

Found on the way: with ``disarm-ha ignore`` the port (as upstream's ``handle_disarm``) prunes the
``target`` of a service in ``request_start_balance``; a success its LRM reported before keeps the
uid, so after ``arm-ha`` the service is ``started`` on an undefined node and the port fails an
assertion in ``_handle_fencing`` (upstream's Perl goes on with an undefined node; not checked
further). The differential check keeps out of it (:func:`~pvegym.sim.engine.differential.lrm_code`
and the dropped kept results); the engine flags it (``ENGINE_ERRORS``).
"""
