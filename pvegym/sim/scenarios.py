"""Named scenarios: plain data built by a function of the seed-independent scenario name.

Each entry returns the dict of a :class:`~pvegym.sim.scenario.Scenario` (the same format a TOML
scenario file uses), so overrides and validation work the same for all; every lookup of a
scenario by name (named, family or file, with overrides) is :func:`pvegym.sim.catalog.resolve`.
Randomness (workload noise, the LRM's timing) comes from the episode seed, not from here.

``docs/model.md`` (*Targets*) lists the field scenarios' targets; the figures they are built from
are the field report's (a two-node PVE 9.2 cluster, an idle night with the imbalance metric near
49 %, pressure appearing on one node) and the convergence patch's (a 24 GiB guest at ~430 MiB/s).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pvegym.errors import ConfigError
from pvegym.units import GiB, MiB

ScenarioData = dict[str, Any]
_REGISTRY: dict[str, Callable[[], ScenarioData]] = {}


def scenario(name: str) -> Callable[[Callable[[], ScenarioData]], Callable[[], ScenarioData]]:
    def deco(fn: Callable[[], ScenarioData]) -> Callable[[], ScenarioData]:
        _REGISTRY[name] = fn
        return fn

    return deco


def names() -> list[str]:
    return sorted(_REGISTRY)


def describe(name: str) -> str:
    return str(_REGISTRY[name]().get("description", ""))


def scenario_data(name: str) -> ScenarioData:
    """A fresh copy of the plain data of named scenario ``name`` (any name, a family or a file:
    :func:`pvegym.sim.catalog.resolve`)."""
    if name not in _REGISTRY:
        raise ConfigError(
            "scenario", f"unknown named scenario {name!r} (allowed: {', '.join(names())})"
        )
    return copy.deepcopy(_REGISTRY[name]())


# --------------------------------------------------------------------------------------------
# helpers


def _noise(mean: float, sigma: float, tau: float = 120.0) -> dict[str, Any]:
    return {"type": "ou", "mean": mean, "sigma": sigma, "tau": tau}


def _node(
    name: str, cores: int, mem_gib: float, base_cpu: Any = 0.0, base_mem: Any = 0.0
) -> dict[str, Any]:
    return {
        "name": name,
        "maxcpu": cores,
        "maxmem": mem_gib * GiB,
        "base_cpu": base_cpu,
        "base_mem": base_mem,
    }


def _vm(
    sid: str, node: str, vcpus: int, mem_gib: float, cpu: Any, memhost: Any, **kw: Any
) -> dict[str, Any]:
    return {
        "sid": sid,
        "node": node,
        "maxcpu": vcpus,
        "maxmem": mem_gib * GiB,
        "cpu": cpu,
        "memhost": memhost,
        **kw,
    }


# --------------------------------------------------------------------------------------------
# named scenarios


# --------------------------------------------------------------------------------------------
# the field scenarios (docs/model.md, Targets), from the field report
#
# Shared setting: the field report's cluster ("a two-node PVE 9.2 cluster (pve-ha-manager
# 5.2.5)"). The field report gives no hardware sizes; the targets ask for "a few tens of cores,
# 64–256 GiB", so every field scenario uses two nodes of 32 cores and 128 GiB. Guests are VMs
# (``vm:``, live migration) with the convergence patch's migration network (~430 MiB/s, the
# scenario default). Memory signals are ``memhost`` (host footprint); ``mem_ratio`` < 1 is the
# balloon-reported guest view (``mem``), which upstream uses (``docs/model.md``, *Cluster and workloads*).

FIELD_CORES = 32  # cores per node ("a few tens of cores")
FIELD_MEM_GIB = 128  # GiB per node (64–256 GiB)
FIELD_NODES = ("node1", "node2")

#: Host overhead of an otherwise empty PVE node: pve-cluster, pvestatd, corosync, ~0.3 cores and
#: ~4 GiB (no guests, no ZFS ARC).
HOST_CPU = 0.3
HOST_MEM = 4 * GiB


def _host(cpu_sigma: float = 0.05, mem_sigma: float = 0.1 * GiB) -> tuple[Any, Any]:
    """Base load of a quiet PVE host: host overhead plus small OU noise (cores, bytes)."""
    return (
        _noise(HOST_CPU, cpu_sigma, 30.0),
        [{"type": "constant", "level": HOST_MEM}, _noise(0.0, mem_sigma, 300.0)],
    )


def _field_node(name: str, base_cpu: Any, base_mem: Any) -> dict[str, Any]:
    return _node(name, FIELD_CORES, FIELD_MEM_GIB, base_cpu=base_cpu, base_mem=base_mem)


@scenario("failure-loop")
def failure_loop() -> ScenarioData:
    """The field report's symptom 1: a rebalance migration that always fails (local CD-ROM) is the best move.

    Field report figures encoded: two nodes ("two-node PVE 9.2 cluster"); the guest whose move is the best
    one has a local CD-ROM, so ``qm migrate`` fails after its precheck (``local_resources``);
    "deliberately stress-testing CRS": node1 runs ~29 of its 32 cores of stress load (real CPU
    pressure, ~20–25 % PSI some), node2 is nearly idle; 20 minutes, in which the field report saw 25
    identical failing attempts, "re-issued every ~40 seconds" (hold 3 rounds + the LRM's 10 s loop
    + the round in which the CRM sees the failure). Target (docs/model.md): upstream 20–31 failed
    attempts, patched ≤ 6 (backoff 60 s, 120 s, …).
    """
    c1, m1 = _host()
    c2, m2 = _host()
    return {
        "name": "failure-loop",
        "description": "2 nodes; a stress VM with a local CD-ROM is the best move (fails every time)",
        "duration": "20m",
        "nodes": [_field_node("node1", c1, m1), _field_node("node2", c2, m2)],
        "guests": [
            # the stress VM with a local CD-ROM attached: moving it is the best balancing move
            _vm(
                "vm:101",
                "node1",
                16,
                32,
                [{"type": "constant", "level": 14.0}, _noise(0.0, 0.4, 30.0)],
                24 * GiB,
                mem_ratio=0.8,
                dirty_rate=200 * MiB,
                wws=4 * GiB,
                local_resources=True,
            ),
            _vm(
                "vm:102",
                "node1",
                8,
                16,
                [{"type": "constant", "level": 8.0}, _noise(0.0, 0.3, 30.0)],
                12 * GiB,
                mem_ratio=0.8,
                dirty_rate=100 * MiB,
                wws=2 * GiB,
            ),
            _vm(
                "vm:103",
                "node1",
                8,
                16,
                [{"type": "constant", "level": 6.0}, _noise(0.0, 0.3, 30.0)],
                10 * GiB,
                mem_ratio=0.8,
                dirty_rate=100 * MiB,
                wws=2 * GiB,
            ),
            _vm("vm:201", "node2", 4, 8, _noise(1.0, 0.1), 6 * GiB, mem_ratio=0.8),
        ],
    }


#: ``dominant-oscillation``: the field report's "~0.5 percentage points" of base-load difference (node load
#: ``(cpu/maxcpu + mem/maxmem)/2``) that qualifies a move of the dominant VM under upstream's
#: accounting and its 10 % relative margin.
QUALIFYING_ASYMMETRY = 0.005
DOMINANT_MEMHOST = 36 * GiB  # host footprint of the dominant VM (48 GiB configured)
DOMINANT_CPU = 0.3  # cores, an idle VM


def _dominant_mem_ratio(margin: float = 0.1) -> float:
    """Balloon view / host footprint of the dominant VM such that, with upstream's accounting, a
    base-load asymmetry δ* = :data:`QUALIFYING_ASYMMETRY` is where a swap starts to qualify.

    Two nodes, the VM (load share ``h = hc + hm``: cpu and memhost parts) on the node whose base
    load is higher by δ: before ``(h + δ)/S``; upstream predicts moving load ``hc + r·hm``, so
    after ``(h − δ − 2g)/S`` with the accounting gap ``g = (1 − r)·hm``. The relative margin holds
    from ``(2δ + 2g)/(h + δ) = margin``, i.e. ``δ* = (margin·h − 2g)/(2 − margin)``. Solving for r
    with δ* = 0.005: ≈ 0.982 (mem ≈ 35.4 GiB of 36 GiB memhost); with memhost accounting (g = 0)
    the swap needs δ ≥ margin·h/(2 − margin) ≈ 0.77 pp instead.
    """
    hc = DOMINANT_CPU / FIELD_CORES / 2
    hm = DOMINANT_MEMHOST / (FIELD_MEM_GIB * GiB) / 2
    g = (margin * (hc + hm) - (2 - margin) * QUALIFYING_ASYMMETRY) / 2
    return 1.0 - g / hm


@scenario("dominant-oscillation")
def dominant_oscillation() -> ScenarioData:
    """The field report's symptom 2: one dominant VM oscillates between two nodes of an otherwise idle cluster.

    Field report figures encoded: two nodes, nearly idle ("an otherwise idle cluster"); one dominant VM
    (48 GiB configured, 36 GiB host footprint ``memhost``, ~15 % of a node's load) whose balloon
    view ``mem`` is smaller ("the balloon-adjusted guest memory value is used instead of the
    host-side footprint") by just enough that, with upstream's accounting and 10 % margin, "a
    base load difference of ~0.5 percentage points qualifies a motion and later its reverse"
    (:func:`_dominant_mem_ratio`); "sub-percent base load fluctuations": each node's base load
    stays within ±1 pp about 95 % of the time, i.e. σ ≈ 0.5 pp of node load (host CPU σ 0.25 cores
    with 30 s correlation — "the point-in-time usage samples are noisy" — and host memory σ
    0.75 GiB over 5 min); 27 minutes, in which the field report saw 5 moves of that VM.
    The VM is the only HA resource (a second small VM would make its swap lopsided and end the
    oscillation after one move). Target: upstream 3–10 moves of the dominant VM, patched 0.
    """
    nodes = [
        _field_node(
            name,
            _noise(HOST_CPU, 0.25, 30.0),
            [{"type": "constant", "level": HOST_MEM}, _noise(0.0, 0.75 * GiB, 300.0)],
        )
        for name in FIELD_NODES
    ]
    return {
        "name": "dominant-oscillation",
        "description": "2 idle nodes, one dominant VM (memhost 36 GiB > balloon mem), sub-% noise",
        "duration": "27m",
        "nodes": nodes,
        "guests": [
            _vm(
                "vm:110",
                "node1",
                8,
                48,
                _noise(DOMINANT_CPU, 0.05, 30.0),
                DOMINANT_MEMHOST,
                mem_ratio=round(_dominant_mem_ratio(), 4),
                dirty_rate=8 * MiB,
                wws=2 * GiB,
            ),
        ],
    }


#: ``idle-night``'s non-HA VM on node2 (cores).
NON_HA_CPU = 0.05


@scenario("idle-night")
def idle_night() -> ScenarioData:
    """The field report's symptom 3: an idle night with the imbalance metric at ~0.49 and nothing to gain.

    Field report figures encoded: "an idle night (imbalance metric standing at ~49% the whole time)" —
    with nothing moving, the normalized imbalance of the node loads is ≈ 0.49 for 8 hours; most of
    it is load no motion can remove: node1's ZFS ARC (22 GiB, counted as used memory since
    ``memused = MemTotal − MemAvailable``) on top of the host overhead; night-time noise (ARC σ
    0.5 GiB drifting over 15 min, host CPU σ 0.1 cores); a handful of small idle VMs whose moves
    barely qualify ("kept issuing barely-qualifying migrations with nothing to gain for any
    workload"); no pressure anywhere; node2 also runs a VM that is not an HA resource (``vm:900``,
    2 GiB, 0.05 cores: the field report's "non-HA guests" in the unattributable load) — it was 2 GiB and
    0.05 cores of node2's base load before, so the nodes' figures the dynamic balancer reads are
    the same, and no balancer may move it. Target: upstream ≥ 3 moves in the night, patched 0.
    """
    return {
        "name": "idle-night",
        "description": "2 nodes, 8 h night, imbalance ~0.49 mostly from host/ARC load, no pressure",
        "duration": "8h",
        "nodes": [
            # node1 runs ZFS: its ARC is memory in use that no VM accounts for
            _field_node(
                "node1",
                _noise(HOST_CPU + 0.1, 0.1, 60.0),
                [
                    {"type": "constant", "level": HOST_MEM + 22 * GiB},
                    _noise(0.0, 0.5 * GiB, 900.0),
                ],
            ),
            _field_node(
                "node2",
                _noise(HOST_CPU - NON_HA_CPU, 0.08, 60.0),
                [{"type": "constant", "level": HOST_MEM}, _noise(0.0, 0.2 * GiB, 900.0)],
            ),
        ],
        "guests": [
            # small idle VMs: each move of one shifts ~0.6 % of a node's load — barely qualifying
            _vm("vm:101", "node1", 2, 4, _noise(0.10, 0.04), 2 * GiB, mem_ratio=0.75),
            _vm("vm:102", "node1", 2, 4, _noise(0.10, 0.04), 2 * GiB, mem_ratio=0.75),
            _vm("vm:103", "node1", 1, 4, _noise(0.08, 0.03), 1.5 * GiB, mem_ratio=0.75),
            _vm("vm:104", "node1", 1, 2, _noise(0.08, 0.03), 1.5 * GiB, mem_ratio=0.8),
            _vm("vm:105", "node1", 1, 2, _noise(0.08, 0.03), 1.5 * GiB, mem_ratio=0.8),
            _vm("vm:201", "node2", 2, 8, _noise(0.10, 0.04), 3 * GiB, mem_ratio=0.75),
            _vm("vm:202", "node2", 1, 4, _noise(0.05, 0.02), 2 * GiB, mem_ratio=0.8),
            # not an HA resource: it loads node2, the HA manager's usage sees it, nothing moves it
            _vm("vm:900", "node2", 1, 4, NON_HA_CPU, 2 * GiB, ha=False),
        ],
    }


#: ``pressure-evacuation``: when the load on node1 starts to rise (s).
PRESSURE_ONSET_S = 600.0


def _steady_vm(sid: str, node: str, cores: float) -> dict[str, Any]:
    """A steady VM of ``pressure-evacuation``: 8 vCPUs, 16 GiB (12 GiB on the host), ``cores``
    busy with a little noise, 30 MiB/s of dirtying."""
    cpu = [{"type": "constant", "level": cores}, _noise(0.0, 0.3, 30.0)]
    return _vm(sid, node, 8, 16, cpu, 12 * GiB, mem_ratio=0.85, dirty_rate=30 * MiB, wws=2 * GiB)


@scenario("pressure-evacuation")
def pressure_evacuation() -> ScenarioData:
    """The field report's validation: "real node pressure leads to a single strongly qualifying evacuation
    about two minutes after the pressure appears".

    Field report figures encoded: two nodes; at t0 = 10 min a batch job in vm:101 on node1 ramps up over
    ~90 s (2 → 12 cores in four steps of its workers), taking node1 from ~18 to ~28 of its 32 cores
    — real CPU pressure (~20 % PSI some avg10) — while node2 runs ~10 cores. The ``pressure-onset``
    event marks t0 (the ramp's first step lands in the round after it). One move of vm:101 or a
    peer (~10 cores) balances both nodes at ~18–20 cores, below pressure. 20 minutes. Target:
    patched exactly 1 move, off node1, 30–240 s after t0, node1's cpu some avg10 < 10 % within
    5 min of the move.
    """
    t0 = PRESSURE_ONSET_S
    c1, m1 = _host()
    c2, m2 = _host()
    ramp = {
        "type": "steps",
        "at": [[t0 + 10, 2.5], [t0 + 40, 5.0], [t0 + 70, 7.5], [t0 + 100, 10.0]],
    }
    return {
        "name": "pressure-evacuation",
        "description": "2 nodes; at t0=10m a batch job ramps node1 to ~28/32 cores (CPU pressure)",
        "duration": "20m",
        "nodes": [_field_node("node1", c1, m1), _field_node("node2", c2, m2)],
        "guests": [
            _vm(
                "vm:101",
                "node1",
                16,
                16,
                [{"type": "constant", "level": 2.0}, ramp, _noise(0.0, 0.3, 30.0)],
                12 * GiB,
                mem_ratio=0.85,
                dirty_rate=50 * MiB,
                wws=4 * GiB,
            ),
            _steady_vm("vm:102", "node1", 7.0),
            _steady_vm("vm:103", "node1", 8.0),
            _steady_vm("vm:201", "node2", 6.0),
            _steady_vm("vm:202", "node2", 4.0),
        ],
        "events": [{"t": t0, "type": "pressure-onset", "node": "node1"}],
    }


#: ``pressure-evacuation-imbalanced``: the idle VM outside HA on node1 that makes the imbalance
#: exceed upstream's threshold before any pressure (GiB configured, GiB resident, cores)
IMBALANCE_VM = ("vm:900", 40, 32, 0.3)


@scenario("pressure-evacuation-imbalanced")
def pressure_evacuation_imbalanced() -> ScenarioData:
    """``pressure-evacuation`` with an imbalance but no pressure before t0: where the two
    balancers differ (issue 34).

    In ``pressure-evacuation`` the imbalance first exceeds upstream's threshold (0.3) when the
    pressure appears, so upstream and patched make the same move at the same time. Patched's
    pressure gate (patch 7) is consulted only after upstream's threshold and hold counter fired
    (``PatchedPolicy.should_consider``), so pressure without imbalance moves neither; what tells
    them apart is imbalance without pressure: "Load asymmetry by itself is not a performance
    problem" (the field report, patch 7). Here node1 also runs an idle VM that is not an HA
    resource (``vm:900``: 40 GiB configured, 32 GiB resident, 0.3 cores; no balancer may move
    it), so before t0 the node loads are ≈ 0.56 and 0.27 — a normalized imbalance ≈ 0.35 > 0.3
    (the guests' CPU noise moves it by ≈ 0.01), while node1 runs ~18 of its 32 cores, without
    pressure, exactly as in ``pressure-evacuation``. At t0 the same batch job ramps node1 to ~28
    cores. Targets: upstream moves before t0 (its threshold is exceeded from the first round:
    hold 3 rounds), a churn move (no node under pressure); patched makes no move before t0 (its
    gate is closed) and then ``pressure-evacuation``'s: exactly 1 move, off node1, 30–240 s after
    t0, node1's cpu some avg10 < 10 % within 5 min of it.
    """
    data = pressure_evacuation()
    sid, maxmem_gib, resident_gib, cores = IMBALANCE_VM
    data["name"] = "pressure-evacuation-imbalanced"
    data["description"] = (
        "pressure-evacuation, but a non-HA VM on node1 makes the imbalance ~0.35 before t0 "
        "(no pressure)"
    )
    data["guests"].append(
        _vm(sid, "node1", 2, maxmem_gib, cores, resident_gib * GiB, mem_ratio=0.9, ha=False)
    )
    return data


@scenario("nonconverging-migration")
def nonconverging_migration() -> ScenarioData:
    """The convergence patch's case: the best move is a 24 GiB guest that dirties memory faster than 430 MiB/s.

    Seed figures encoded: "a 24 GiB guest with ~430 MiB/s transfer speed and a 600-760 MiB/s
    dirty rate" (680 MiB/s raw over all 24 GiB, the bandwidth is the scenario default 430 MiB/s);
    dirtying that auto-converge throttling cannot slow (``throttle_sensitivity`` 0, docs/model.md's
    non-converging case: the convergence patch's guest kept dirtying at 600–760 MiB/s under throttling); the
    guest is the best move of a rebalance on a two-node cluster whose node1 is under CPU pressure
    (~27 of 32 cores), so the patched balancer acts too. 15 minutes: with the unpatched
    qemu-server and QEMU's 5 s sync timer the migration runs ≈ 300–320 s until qemu-server's
    doubling of the downtime limit lets QEMU switch over with a ≈ 23 s guest pause (still running
    after 10 min without the timer, ``migration.sync_timer = false``); the patched qemu-server
    aborts at 4 passes (≈ 229 s), after which the balancer backs off. Target (``docs/model.md``, Targets): upstream
    (``--qemu-server unpatched``) runs ≥ 280 s and ends with a guest pause ≥ 10 s; patched
    (``--qemu-server patched``) aborted at 4 passes, then backed off.
    """
    c1, m1 = _host()
    c2, m2 = _host()
    return {
        "name": "nonconverging-migration",
        "description": "2 nodes; the best move is a 24 GiB VM dirtying 680 MiB/s (> 430 MiB/s)",
        "duration": "15m",
        "nodes": [_field_node("node1", c1, m1), _field_node("node2", c2, m2)],
        "guests": [
            _vm(
                "vm:120",
                "node1",
                8,
                24,
                [{"type": "constant", "level": 7.0}, _noise(0.0, 0.2, 30.0)],
                22 * GiB,
                mem_ratio=0.9,
                dirty_rate=680 * MiB,
                wws=24 * GiB,
                throttle_sensitivity=0.0,
            ),
            _vm(
                "vm:121",
                "node1",
                8,
                16,
                [{"type": "constant", "level": 8.0}, _noise(0.0, 0.3, 30.0)],
                12 * GiB,
                mem_ratio=0.85,
                dirty_rate=40 * MiB,
                wws=2 * GiB,
            ),
            _vm(
                "vm:122",
                "node1",
                8,
                16,
                [{"type": "constant", "level": 8.0}, _noise(0.0, 0.3, 30.0)],
                12 * GiB,
                mem_ratio=0.85,
                dirty_rate=40 * MiB,
                wws=2 * GiB,
            ),
            _vm(
                "vm:123",
                "node1",
                4,
                8,
                [{"type": "constant", "level": 3.0}, _noise(0.0, 0.2, 30.0)],
                6 * GiB,
                mem_ratio=0.85,
            ),
            _vm("vm:201", "node2", 4, 8, _noise(3.0, 0.2, 30.0), 8 * GiB, mem_ratio=0.85),
        ],
    }


@scenario("nonconverging-with-alternative")
def nonconverging_with_alternative() -> ScenarioData:
    """``nonconverging-migration`` where a cheaper adequate motion exists (beyond the field report).

    The field report's remaining gap: "the balancer prefers the largest imbalance improvement over the
    cheapest adequate motion". Same cluster, same non-converging 24 GiB VM (``vm:120``, 680 MiB/s
    raw, not throttle-sensitive), but ``vm:121`` is a CPU-heavy VM with a small memory footprint
    (8 of 8 cores busy, 4 GiB host memory, 20 MiB/s of dirtying): moving it removes node1's
    pressure as well as moving ``vm:120`` does (8 vs 7 cores) while sending ~4 GiB in ~10 s
    instead of a migration that never converges. The imbalance metric still prefers ``vm:120``
    (its memory counts in the node load), so ``upstream``/``patched`` pick it.
    """
    data = nonconverging_migration()
    data["name"] = "nonconverging-with-alternative"
    data["description"] = (
        "nonconverging-migration, but an 8-core VM with 4 GiB is a cheaper adequate motion"
    )
    for g in data["guests"]:
        if g["sid"] == "vm:121":
            g.update(maxmem=6 * GiB, memhost=4 * GiB, dirty_rate=20 * MiB, wws=1 * GiB)
    return data


@scenario("overcommit-target")
def overcommit_target() -> ScenarioData:
    """Issue 17: upstream's move lands on a node without enough free memory.

    qemu-server checks local resources and CD-ROMs before a migration, not the target's free
    memory, so such a move does not fail: the target overcommits. Two nodes; node1 runs ~28 of
    its 32 cores (CPU pressure, ~24 % some) and 96 of its 128 GiB; node2 is nearly idle but holds
    a 96 GiB in-memory database VM (100 of 128 GiB in use, 28 GiB free). The best balancing move
    is ``vm:101`` (8 cores; 32 GiB host footprint, of which its balloon statistics report half —
    the ``mem`` upstream's dynamic usage counts): upstream expects node2 at 116 GiB, but it
    receives 32 GiB and holds 132 GiB — 4 GiB past its memory (within the 8 GiB of swap the PVE
    installer gives a 128 GiB node: no OOM kill), heavy memory pressure. The patched balancer
    (``memhost``) sees the same move as the best; afterwards node1's CPU pressure is gone and the
    only pressure left is node2's memory, which its pressure gate reacts to. 20 minutes.
    Targets: no failed move, memory stall on the target (``stall_mem_s`` > 0), no OOM kill;
    patched: its gate open on the target's memory pressure alone after the move.
    """
    c1, m1 = _host()
    c2, m2 = _host()
    return {
        "name": "overcommit-target",
        "description": "2 nodes; the best move lands on a node with 28 GiB free: it overcommits",
        "duration": "20m",
        "nodes": [_field_node("node1", c1, m1), _field_node("node2", c2, m2)],
        "guests": [
            _vm(
                "vm:101",
                "node1",
                8,
                48,
                [{"type": "constant", "level": 8.0}, _noise(0.0, 0.2, 30.0)],
                32 * GiB,
                mem_ratio=0.5,
                dirty_rate=50 * MiB,
                wws=4 * GiB,
            ),
            _vm(
                "vm:102",
                "node1",
                12,
                32,
                [{"type": "constant", "level": 11.0}, _noise(0.0, 0.3, 30.0)],
                30 * GiB,
                mem_ratio=0.9,
                dirty_rate=40 * MiB,
                wws=2 * GiB,
            ),
            _vm(
                "vm:103",
                "node1",
                10,
                32,
                [{"type": "constant", "level": 9.0}, _noise(0.0, 0.3, 30.0)],
                30 * GiB,
                mem_ratio=0.9,
                dirty_rate=40 * MiB,
                wws=2 * GiB,
            ),
            # the in-memory database: idle CPU, its memory all resident
            _vm("vm:201", "node2", 4, 100, _noise(0.5, 0.05, 30.0), 96 * GiB, mem_ratio=1.0),
        ],
    }


#: ``bundle-migration``: the bundle (positive affinity: leader first) the balancer moves
BUNDLE_MEMBERS = ("vm:101", "vm:102")


@scenario("bundle-migration")
def bundle_migration() -> ScenarioData:
    """Issue 17: a bundle's members migrate at once, sharing the network.

    An application VM and its database VM are kept together by a positive resource-affinity rule
    (``vm:101``, 8 cores busy, 32 GiB host footprint; ``vm:102``, 6 cores, 24 GiB; both dirty
    a 2 GiB working set at 40 / 30 MiB/s). Two nodes of the field report's size; node1 also runs
    a 14-core batch VM pinned to it (a strict node-affinity rule), so node1 runs ~28 of its 32
    cores (CPU pressure) and the best balancing move is the bundle. The HA manager queues the
    leader and its partner in one CRM round; node1's LRM forks both workers at its next tick
    (``LRM.pm`` ``run_workers``, ``max_workers`` 4), and both streams run at the single-stream
    cap (430 MiB/s) on the default 10 GbE links, which carry two. 20 minutes.
    Target: the bundle's motion wall time (``t_end − t`` of its move record, from the CRM
    round that queued it to its last member's end, the LRM's offset and the precheck included)
    ≤ 1.2 × its longest member's migration time alone; run one after the other it took the sum
    (≈ 1.7 ×).
    """
    c1, m1 = _host()
    c2, m2 = _host()
    return {
        "name": "bundle-migration",
        "description": "2 nodes; the best move is a bundle of two VMs, which migrate at once",
        "duration": "20m",
        "nodes": [_field_node("node1", c1, m1), _field_node("node2", c2, m2)],
        "guests": [
            _vm(
                "vm:101",
                "node1",
                10,
                48,
                [{"type": "constant", "level": 8.0}, _noise(0.0, 0.2, 30.0)],
                32 * GiB,
                dirty_rate=40 * MiB,
                wws=2 * GiB,
            ),
            _vm(
                "vm:102",
                "node1",
                8,
                32,
                [{"type": "constant", "level": 6.0}, _noise(0.0, 0.2, 30.0)],
                24 * GiB,
                dirty_rate=30 * MiB,
                wws=2 * GiB,
            ),
            _vm(
                "vm:103",
                "node1",
                16,
                32,
                [{"type": "constant", "level": 14.0}, _noise(0.0, 0.3, 30.0)],
                16 * GiB,
                dirty_rate=20 * MiB,
                wws=1 * GiB,
            ),
            _vm("vm:201", "node2", 4, 16, _noise(1.0, 0.1, 30.0), 8 * GiB),
        ],
        "resource_affinity": [
            {"name": "app-and-db", "resources": list(BUNDLE_MEMBERS), "affinity": "positive"}
        ],
        "node_affinity": [
            {
                "name": "batch-on-node1",
                "resources": ["vm:103"],
                "nodes": {"node1": 1},
                "strict": True,
            }
        ],
    }


#: The field scenarios of ``docs/model.md`` (Targets), in the table's order, and issue 17's
#: ``overcommit-target`` and ``bundle-migration``.
FIELD_SCENARIOS = (
    "failure-loop",
    "dominant-oscillation",
    "idle-night",
    "pressure-evacuation",
    "pressure-evacuation-imbalanced",
    "nonconverging-migration",
    "overcommit-target",
    "bundle-migration",
)


# --------------------------------------------------------------------------------------------
# failures and maintenance (issue 16): the full HA stack's fencing, recovery and maintenance

#: ``maintenance-drain``: node1 enters maintenance (s) and leaves it (s)
MAINTENANCE_ON_S = 600.0
MAINTENANCE_OFF_S = 2400.0
#: ``node-failure``: node2 loses its network (s)
NODE_FAILURE_S = 600.0


def _loaded_4node(name: str, description: str, duration: str) -> ScenarioData:
    """A loaded 4-node cluster on the full HA stack: four nodes of 32 cores and 128 GiB, each
    running five VMs of 8 vCPUs and 16 GiB (12 GiB on the host, 30 MiB/s of dirtying in a 2 GiB
    working set) busy with 3.5–5.5 cores each — ~22.5 of 32 cores per node (70 %), so that three
    nodes carrying a fourth node's guests run at ~30 of 32 cores, under CPU pressure. Every node
    runs the same five loads (rotated): the cluster is balanced before the event."""
    nodes = [f"node{i}" for i in range(1, 5)]
    guests: list[dict[str, Any]] = []
    for i, node in enumerate(nodes):
        for j in range(5):
            cores = 3.5 + 0.5 * ((i + j) % 5)
            cpu = [{"type": "constant", "level": cores}, _noise(0.0, 0.4, 60.0)]
            guests.append(
                _vm(
                    f"vm:{101 + 100 * i + j}",
                    node,
                    8,
                    16,
                    cpu,
                    12 * GiB,
                    mem_ratio=0.85,
                    dirty_rate=30 * MiB,
                    wws=2 * GiB,
                )
            )
    return {
        "name": name,
        "description": description,
        "duration": duration,
        "ha_stack": "full",
        "nodes": [_field_node(n, *_host()) for n in nodes],
        "guests": guests,
    }


@scenario("maintenance-drain")
def maintenance_drain() -> ScenarioData:
    """Node maintenance on a loaded cluster: node1 enters maintenance at 10 min
    (``ha-manager crm-command node-maintenance enable node1``) and leaves it at 40 min; 50 min.

    The HA manager drains node1 (its LRM enters maintenance mode, the CRM migrates every service
    to the best other node, remembering ``maintenance_node``) and moves them back when it leaves
    maintenance. What a balancer must not do: target node1 while it is in maintenance (the HA
    manager refuses such a motion, the mask too), interleave its own motions with the drain
    (``maintenance_moves``), or fight the move back after it.
    """
    data = _loaded_4node(
        "maintenance-drain",
        "4 loaded nodes; node1 in maintenance from 10m to 40m (full HA stack)",
        "50m",
    )
    data["events"] = [
        {"t": MAINTENANCE_ON_S, "type": "maintenance-enable", "node": "node1"},
        {"t": MAINTENANCE_OFF_S, "type": "maintenance-disable", "node": "node1"},
    ]
    return data


@scenario("node-failure")
def node_failure() -> ScenarioData:
    """A node failure on a loaded cluster: node2 loses its network at 10 min; 20 min.

    Node2 leaves the quorate partition: its LRM cannot renew its agent lock, its watchdog resets
    it 60 s later, the master fences it once the lock expired (120 s after the last renewal) and
    recovers its five services on the other nodes (CRS scoring). What a balancer must not do:
    fight the recovery placement, or add motions while services are down (``recovery_s``,
    ``services_down_s``).
    """
    data = _loaded_4node(
        "node-failure", "4 loaded nodes; node2 loses its network at 10m (full HA stack)", "20m"
    )
    data["events"] = [{"t": NODE_FAILURE_S, "type": "network-off", "node": "node2"}]
    return data


#: the scenarios of failures and maintenance (issue 16), in the headline experiment
EVENT_SCENARIOS = ("maintenance-drain", "node-failure")


@scenario("contended-3node")
def contended_3node() -> ScenarioData:
    """Three nodes; node1 is overloaded by busy guests with diurnal load and bursts, node3 idle.
    A balancer that moves one or two guests off node1 removes most of the CPU pressure."""
    g: list[dict[str, Any]] = []
    for i in range(6):
        cpu = [
            {"type": "constant", "level": 2.2},
            {"type": "diurnal", "amplitude": 0.5, "period": 3600, "phase": 600 * i},
            _noise(0.0, 0.3, 60.0),
            {"type": "bursts", "rate_per_hour": 2, "height": 1.5, "duration": 120},
        ]
        g.append(
            _vm(f"vm:{101 + i}", "node1", 4, 8, cpu, 6 * GiB, dirty_rate=40 * MiB, wws=2 * GiB)
        )
    for i in range(3):
        g.append(
            _vm(
                f"vm:{201 + i}",
                "node2",
                4,
                8,
                [{"type": "constant", "level": 1.5}, _noise(0.0, 0.2)],
                5 * GiB,
                dirty_rate=20 * MiB,
                wws=1 * GiB,
            )
        )
    g.append(_vm("vm:301", "node3", 2, 4, _noise(0.3, 0.1), 2 * GiB))
    return {
        "name": "contended-3node",
        "description": "3 nodes of 16 cores; node1 runs ~14 cores of bursty demand, node3 is idle",
        "duration": "1h",
        "nodes": [
            _node("node1", 16, 96, base_cpu=_noise(0.8, 0.1), base_mem=8 * GiB),
            _node("node2", 16, 96, base_cpu=_noise(0.6, 0.1), base_mem=8 * GiB),
            _node("node3", 16, 96, base_cpu=_noise(0.4, 0.05), base_mem=6 * GiB),
        ],
        "guests": g,
    }
