"""Unit tests of the field report's patched balancer, patch by patch, on hand-built views."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.experiments.ablation import run_episode
from pvegym.policies import make_policy
from pvegym.policies.patched import PatchedPolicy
from pvegym.policies.upstream import UpstreamPolicy
from pvegym.sim.view import ClusterView, MotionResult

GIB = float(1 << 30)
NODES = ("node1", "node2")
SWITCHES = ("outcome_tracking", "use_memhost", "dead_band", "residual_ema", "pressure_gate")


def view(
    t: float = 100.0,
    *,
    placement: dict[str, str] | None = None,
    cpu: dict[str, float] | None = None,
    mem: dict[str, float] | None = None,
    memhost: dict[str, float] | None = None,
    base_cpu: tuple[float, float] = (0.0, 0.0),
    base_mem: tuple[float, float] = (0.0, 0.0),
    cpu_some: tuple[float, float] = (50.0, 0.0),
    mem_some: tuple[float, float] = (0.0, 0.0),
    results: tuple[MotionResult, ...] = (),
) -> ClusterView:
    """Two nodes of 32 cores / 128 GiB; node stats = base + Σ guests' cpu and memhost."""
    placement = placement or {"vm:101": "node1", "vm:102": "node1", "vm:201": "node2"}
    sids = tuple(sorted(placement))
    cpu = cpu or {}
    mem = mem or {}
    memhost = memhost or {}
    gcpu = np.array([cpu.get(s, 4.0) for s in sids])
    ghost = np.array([memhost.get(s, 8 * GIB) for s in sids])
    gmem = np.array([mem.get(s, float(ghost[i])) for i, s in enumerate(sids)])
    gnode = np.array([NODES.index(placement[s]) for s in sids], dtype=np.int64)
    ncpu = np.array(base_cpu, dtype=float)
    nmem = np.array(base_mem, dtype=float)
    np.add.at(ncpu, gnode, gcpu)
    np.add.at(nmem, gnode, np.nan_to_num(ghost, nan=0.0))
    g = len(sids)
    zeros = np.zeros(g)
    return ClusterView(
        t=t,
        node_names=NODES,
        node_online=np.array([True, True]),
        node_maxcpu=np.full(2, 32.0),
        node_maxmem=np.full(2, 128 * GIB),
        node_cpu=ncpu,
        node_mem=nmem,
        node_cpu_some=np.array(cpu_some, dtype=float),
        node_mem_some=np.array(mem_some, dtype=float),
        node_mem_full=np.zeros(2),
        sids=sids,
        guest_node=gnode,
        guest_target=np.full(g, -1, dtype=np.int64),
        guest_state=("started",) * g,
        guest_running=np.ones(g, dtype=bool),
        guest_maxcpu=np.full(g, 16.0),
        guest_maxmem=np.full(g, 32 * GIB),
        guest_cpu=gcpu,
        guest_mem=gmem,
        guest_memhost=ghost,
        guest_cpu_some=zeros,
        guest_cpu_full=zeros,
        guest_mem_some=zeros,
        guest_mem_full=zeros,
        guest_migratable=np.ones(g, dtype=bool),
        results=results,
    )


def patched(**params: object) -> PatchedPolicy:
    """Every attempt in every round (hold 1), so a decide() call is one attempt."""
    params.setdefault("hold_duration", 1)
    pol = make_policy("patched", **params)  # type: ignore[arg-type]
    assert isinstance(pol, PatchedPolicy)
    return pol


def fail(t: float, t_issued: float, sid: str = "vm:101", target: str = "node2") -> MotionResult:
    return MotionResult(sid, "node1", target, False, "local resource", t_issued, t - 5.0)


def success(t: float, t_issued: float, sid: str = "vm:101") -> MotionResult:
    return MotionResult(sid, "node1", "node2", True, "", t_issued, t - 5.0)


# a stressed node1: moving vm:101 (6 cores) is the best move, vm:102 (10 cores) the second best
STRESS = {"cpu": {"vm:101": 6.0, "vm:102": 10.0, "vm:201": 1.0}}


# ---------------------------------------------------------------- registry, config


def test_registered_with_defaults_from_the_seed() -> None:
    pol = make_policy("patched")
    assert isinstance(pol, PatchedPolicy) and pol.name == "patched"
    cfg = pol.config
    assert (cfg.threshold, cfg.hold_duration, cfg.margin) == (0.3, 3, 0.1)  # upstream's
    assert cfg.backoff_base_s == 60.0 and cfg.backoff_factor == 2.0  # "60/120s delays"
    assert cfg.min_pressure_pct == 10.0  # "of at least 10%"
    assert all(getattr(cfg, s) is True for s in SWITCHES)


@pytest.mark.parametrize(
    ("key", "value"),
    [("ema_alpha", 0.0), ("ema_alpha", 1.5), ("backoff_factor", 0.5), ("dead_band", 1),
     ("min_improvement", -0.1), ("cooldown_s", float("nan"))],
)  # fmt: skip
def test_bad_constants_name_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key):
        make_policy("patched", **{key: value})  # type: ignore[arg-type]


# ---------------------------------------------------------------- patch 1: outcome tracking


def test_failed_motion_backs_off_60_120_240_then_cap() -> None:
    pol = patched(backoff_cap_s=300.0)
    t = 100.0
    mv = pol.decide(view(t, **STRESS))  # type: ignore[arg-type]
    assert mv is not None and (mv.sid, mv.target) == ("vm:101", "node2")
    delays = []
    for _ in range(5):
        issued = t
        t += 10.0
        pol.decide(view(t, results=(fail(t, issued),), **STRESS))  # type: ignore[arg-type]
        seen = t
        # during the backoff the pair is never chosen again; the next best move is
        while True:
            t += 10.0
            mv = pol.decide(view(t, **STRESS))  # type: ignore[arg-type]
            assert mv is not None
            if mv.sid == "vm:101":
                break
            assert mv.sid == "vm:102"
            # pretend the alternative was refused: forget it (only vm:101's backoff is under test)
            pol._issued.clear()
        delays.append(t - seen)
    assert delays == [60.0, 120.0, 240.0, 300.0, 300.0]
    assert pol.failures[("vm:101", "node2")] == 5


def test_success_starts_the_cooldown_and_clears_the_failures() -> None:
    pol = patched()
    v = view(100.0, **STRESS)  # type: ignore[arg-type]
    assert pol.decide(v) is not None
    pol.decide(view(110.0, results=(fail(110.0, 100.0),), **STRESS))  # type: ignore[arg-type]
    assert pol.failures == {("vm:101", "node2"): 1}
    assert pol.decide(view(170.0, **STRESS)) is not None  # type: ignore[arg-type] # after 60 s
    pol.decide(view(180.0, results=(success(180.0, 170.0),), **STRESS))  # type: ignore[arg-type]
    assert pol.failures == {}
    assert pol.cooldown_until["vm:101"] == 180.0 + 600.0
    # vm:101 still (per this hand-built view) looks best, but it cools down: vm:102 moves instead
    mv = pol.decide(view(190.0, **STRESS))  # type: ignore[arg-type]
    assert mv is not None and mv.sid == "vm:102"
    pol._issued.clear()
    mv = pol.decide(view(780.0, **STRESS))  # type: ignore[arg-type]
    assert mv is not None and mv.sid == "vm:101"


def test_results_of_motions_it_did_not_issue_are_ignored() -> None:
    pol = patched()
    pol.decide(view(100.0, results=(fail(100.0, 50.0),), **STRESS))  # type: ignore[arg-type]
    assert pol.failures == {} and pol.backoff_until == {}


# ---------------------------------------------------------------- patch 2: memhost


def test_memhost_replaces_mem_with_fallback_on_nan() -> None:
    v = view(
        mem={"vm:101": 4 * GIB, "vm:102": 6 * GIB},
        memhost={"vm:101": 8 * GIB, "vm:102": np.nan},
    )
    _, mem = patched().guest_stats(v)
    sids = list(v.sids)
    assert mem[sids.index("vm:101")] == 8 * GIB
    assert mem[sids.index("vm:102")] == 6 * GIB  # memhost missing: fall back to mem
    _, mem_up = patched(use_memhost=False).guest_stats(v)
    assert mem_up[sids.index("vm:101")] == 4 * GIB


def test_memhost_changes_the_predicted_move() -> None:
    """vm:101's balloon view hides most of its host footprint: with mem it looks like a perfect
    swap; with memhost it is seen to overshoot and the smaller vm:102 is chosen."""
    kw = dict(
        cpu={"vm:101": 0.5, "vm:102": 0.5, "vm:201": 0.5},
        memhost={"vm:101": 40 * GIB, "vm:102": 12 * GIB, "vm:201": 4 * GIB},
        mem={"vm:101": 20 * GIB},
        cpu_some=(50.0, 0.0),
    )
    off = {s: False for s in SWITCHES}
    up = patched(**off).decide(view(**kw))  # type: ignore[arg-type]
    mh = patched(**{**off, "use_memhost": True}).decide(view(**kw))  # type: ignore[arg-type]
    assert up is not None and up.sid == "vm:101"
    assert mh is not None and mh.sid == "vm:102"


# ---------------------------------------------------------------- patch 3: dead band


def test_dead_band_requires_an_absolute_improvement() -> None:
    assert patched(dead_band=False).accept(0.5, 0.42)  # 16 % relative: upstream accepts
    assert not patched().accept(0.5, 0.42)  # 0.08 < min_improvement 0.1
    assert patched().accept(0.5, 0.40)
    assert not patched().accept(0.5, 0.46)  # the relative margin still applies
    assert patched(min_improvement=0.05).accept(0.5, 0.44)


# ---------------------------------------------------------------- patch 6: residual EMA


def test_ema_smooths_only_the_residual() -> None:
    pol = patched(ema_alpha=0.25)
    v1 = view(100.0, base_cpu=(2.0, 1.0), base_mem=(4 * GIB, 2 * GIB))
    s1 = pol.node_stats(v1)
    np.testing.assert_allclose(s1.cpu, v1.node_cpu)  # first sample initialises the EMA
    # a guest's own load jumps (attributable: at once) and node1's residual jumps by 4 cores
    cpu2 = {"vm:101": 12.0, "vm:102": 4.0, "vm:201": 4.0}
    v2 = view(110.0, cpu=cpu2, base_cpu=(6.0, 1.0), base_mem=(4 * GIB, 10 * GIB))
    s2 = pol.node_stats(v2)
    guests = np.array([16.0, 4.0])
    np.testing.assert_allclose(s2.cpu, guests + np.array([2.0 + 0.25 * 4.0, 1.0]))
    np.testing.assert_allclose(s2.mem, np.array([16, 8]) * GIB + np.array([4, 2 + 0.25 * 8]) * GIB)
    # the same round again does not advance the EMA
    np.testing.assert_allclose(pol.node_stats(v2).cpu, s2.cpu)
    # a guest moved to node2 (structural): its usage moves at once, the residual stays smoothed
    v3 = view(
        120.0,
        placement={"vm:101": "node2", "vm:102": "node1", "vm:201": "node2"},
        cpu=cpu2,
        base_cpu=(6.0, 1.0),
        base_mem=(4 * GIB, 10 * GIB),
    )
    s3 = pol.node_stats(v3)
    ema1 = 3.0 + 0.25 * (6.0 - 3.0)
    np.testing.assert_allclose(s3.cpu, np.array([4.0 + ema1, 16.0 + 1.0]))


def test_residual_ema_off_is_upstream_node_stats() -> None:
    v = view(base_cpu=(2.0, 1.0))
    np.testing.assert_allclose(patched(residual_ema=False).node_stats(v).cpu, v.node_cpu)


def test_imbalance_of_its_own_node_stats_is_upstreams() -> None:
    """node_stats computes the imbalance of its stats alongside them; imbalance() returns that
    for those stats and this view only — the value upstream's imbalance gives — and computes
    it for any other stats."""
    from pvegym.policies.upstream import NodeStatsArrays

    pol = patched()
    v = view(base_cpu=(2.0, 1.0))
    stats = pol.node_stats(v)
    assert pol.imbalance(v, stats) == UpstreamPolicy.imbalance(pol, v, stats)
    other = NodeStatsArrays(stats.cpu[::-1] * 3.0, stats.mem, stats.maxcpu, stats.maxmem)
    want = UpstreamPolicy.imbalance(pol, v, other)
    assert want != UpstreamPolicy.imbalance(pol, v, stats)
    assert pol.imbalance(v, other) == want
    one_node = dataclasses.replace(v, node_online=np.array([True, False]))
    assert pol.imbalance(one_node, stats) == 0.0 != pol.imbalance(v, stats)


# ---------------------------------------------------------------- patch 7: pressure gate


@pytest.mark.parametrize(
    ("cpu_some", "mem_some", "acts"),
    [
        ((0.0, 9.9), (0.0, 0.0), False),  # no node at 10 %
        ((10.0, 0.0), (0.0, 0.0), True),  # cpu some avg10 ≥ 10 % on node1
        ((0.0, 0.0), (0.0, 12.0), True),  # memory some counts too
        ((np.nan, np.nan), (np.nan, np.nan), True),  # telemetry off: fail open
        ((0.0, np.nan), (0.0, 0.0), True),  # a node without cpu pressure telemetry: fail open
    ],
)
def test_pressure_gate(
    cpu_some: tuple[float, float], mem_some: tuple[float, float], acts: bool
) -> None:
    v = view(cpu_some=cpu_some, mem_some=mem_some, **STRESS)  # type: ignore[arg-type]
    assert (patched().decide(v) is not None) is acts
    assert patched(pressure_gate=False).decide(v) is not None


def test_gated_attempt_still_resets_the_hold_counter() -> None:
    pol = patched(hold_duration=3)
    quiet = dict(cpu_some=(0.0, 0.0), **STRESS)
    for t in (10.0, 20.0, 30.0):
        assert pol.decide(view(t, **quiet)) is None  # type: ignore[arg-type]
    assert pol.sustained == 0


# ---------------------------------------------------------------- all switches off = upstream


@pytest.mark.parametrize("seed", range(4))
def test_all_switches_off_decides_like_upstream_on_views(seed: int) -> None:
    rng = np.random.default_rng(seed)
    up = UpstreamPolicy(hold_duration=2)
    off: dict[str, object] = {s: False for s in SWITCHES}
    pa = PatchedPolicy(hold_duration=2, **off)
    for k in range(40):
        cpu = {s: float(rng.uniform(0, 12)) for s in ("vm:101", "vm:102", "vm:201")}
        host = {s: float(rng.uniform(1, 40)) * GIB for s in cpu}
        mem = {s: host[s] * float(rng.uniform(0.5, 1)) for s in cpu}
        v = view(10.0 * k, cpu=cpu, memhost=host, mem=mem, cpu_some=(0.0, 0.0))
        assert up.decide(v) == pa.decide(v)
        assert up.last_imbalance == pa.last_imbalance


@pytest.mark.parametrize("scenario", ["failure-loop", "dominant-oscillation"])
def test_all_switches_off_moves_like_upstream_in_simulation(scenario: str) -> None:
    off = {s: False for s in SWITCHES}
    for seed in (0, 1):
        a = run_episode(scenario, "upstream", seed)
        b = run_episode(scenario, "patched", seed, off)
        assert [dataclasses.astuple(m) for m in a.moves] == [
            dataclasses.astuple(m) for m in b.moves
        ]
        assert a.moves


def test_reset_forgets_everything() -> None:
    pol = patched()
    pol.decide(view(100.0, **STRESS))  # type: ignore[arg-type]
    pol.decide(view(110.0, results=(fail(110.0, 100.0),), **STRESS))  # type: ignore[arg-type]
    pol.reset(0)
    assert not pol.failures and not pol.backoff_until and not pol._issued
    assert pol.residual_cpu is None
