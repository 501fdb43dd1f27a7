"""The engine's CRM with its LRMs against the port's (issue 31 items 1 and 2, the LRM): a
derandomized sample, mutated LRM transitions caught, and two clusters in one call."""

from __future__ import annotations

import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pvegym.sim.engine import differential, lrm
from pvegym.sim.engine import lrm_events as lev

ENGINE_DIR = Path(lrm.__file__).parent

#: the sample CI runs (``scripts/engine_diff.py --lrm`` runs any number)
SAMPLE_SEEDS = range(6)
SAMPLE_ROUNDS = 60


def _lrm_source() -> str:
    return (ENGINE_DIR / "lrm.py").read_text()


def test_sample_identical_and_features_exercised() -> None:
    features: Counter[str] = Counter()
    for seed in SAMPLE_SEEDS:
        out = differential.run_lrm_example(seed, rounds=SAMPLE_ROUNDS)
        assert out.identical, out.difference
        assert out.rounds == SAMPLE_ROUNDS
        features.update(out.features)
    for name in (
        "lrm start_giveup",  # max_restart reached
        "lrm retry",
        "recovery_policy_failed",  # max_relocate reached
        "lrm -> lost_agent_lock",
        "lrm -> maintenance",
        "lrm -> active",
        "lrm -> wait_for_agent_lock",
        "lrm disarm_release",
        "lrm worker slots full",
        "lrm mode maintenance",
        "fence_ack",
        "recover",
    ):
        assert features[name] > 0, name


#: per shutdown policy, the event its node shutdowns and reboots must show
POLICY_EVENTS = {
    "conditional": ("lrm stop_freeze", "lrm stop_all"),  # reboot: freeze; shutdown: stop
    "freeze": ("lrm stop_freeze",),
    "failover": ("lrm stop_all",),
    "migrate": ("lrm doing_maint",),
}


#: shutdown paths every sample must reach, whatever the policy
SHUTDOWN_PATHS = ("lrm restart_freeze", "lrm lost_shutdown", "lrm lost_giveup", "lrm exited")


def test_shutdown_sample_identical_for_every_policy() -> None:
    """A sample tilted towards shutdown requests (one per 20 daemon rounds), every example
    identical: seeds 0, 1, … under each shutdown policy in turn until each policy's events and
    the rarer shutdown paths (:data:`SHUTDOWN_PATHS`) were all exercised, at most 8 seeds."""
    per_policy = {name: Counter[str]() for name in differential.k.SHUTDOWN_POLICIES}
    total: Counter[str] = Counter()

    def missing() -> list[tuple[str, str]]:
        out = [
            (name, event)
            for name, seen in per_policy.items()
            for event in (f"lrm shutdown policy {name}", *POLICY_EVENTS[name])
            if not seen[event]
        ]
        return out + [("any", event) for event in SHUTDOWN_PATHS if not total[event]]

    for seed in range(8):
        for policy, name in enumerate(differential.k.SHUTDOWN_POLICIES):
            out = differential.run_lrm_example(seed, p_shutdown=0.05, shutdown_policy=policy)
            assert out.identical, out.difference
            per_policy[name].update(out.features)
            total.update(out.features)
        if seed >= 1 and not missing():
            break
    assert not missing(), missing()


def test_plain_python_lrm_is_the_compiled_one() -> None:
    """Control for the mutants: the unmutated source run as plain Python is identical too."""
    plain = differential.plain_module("lrm", _lrm_source())
    for seed in range(2):
        out = differential.run_lrm_example(seed, rounds=40, lrm=plain)
        assert out.identical, out.difference


@pytest.mark.parametrize(
    ("original", "mutant"),
    [
        # the restart limit is inclusive
        (
            "if lr[s, R_TRIES] >= lcfg[s, C_MAX_RESTART]:",
            "if lr[s, R_TRIES] > lcfg[s, C_MAX_RESTART]:",
        ),
        # at most max_workers forked
        ("            if count >= max_workers:", "            if count > max_workers:"),
        # an active LRM asked for maintenance enters it
        (
            "    elif ln[L_MODE] == MODE_MAINTENANCE:\n"
            "        _set_state(ln, lclu, levbuf, n, LS_MAINTENANCE)",
            "    elif ln[L_MODE] == MODE_MAINTENANCE:\n        pass",
        ),
        # an active LRM that cannot renew its lock loses it
        (
            "    elif not _get_lock(ln, lclu):\n        _set_state(ln, lclu, levbuf, n, LS_LOST)",
            "    elif not _get_lock(ln, lclu):\n        pass",
        ),
        # a finished job prunes the results of uids the manager no longer knows
        (
            "svc[t, F_STATE] == SS_ABSENT or svc[t, F_UID] != lr[t, R_UID]",
            "svc[t, F_STATE] == SS_ABSENT",
        ),
        # 'stopped' runs again every round, other requests once
        (
            "if state != SS_STOPPED and uid != NONE and lr[s, R_CODE] != NO_RESULT",
            "if uid != NONE and lr[s, R_CODE] != NO_RESULT",
        ),
        # the conditional policy freezes on a reboot, stops on a shutdown
        ("        freeze_all = reboot\n", "        freeze_all = not reboot\n"),
        # a node shutdown queues a stop job for each of its services
        (
            "                _queue_resource_command(ln, lw, lr, s, NONE, SS_REQUEST_STOP, NONE, NONE)",
            "                pass",
        ),
        # an event carries the clock of its line: the polls advance it
        (
            "        ln[L_CLOCK] += 1\n        lclu[LK_CLOCK] = ln[L_CLOCK]\n",
            "        ln[L_CLOCK] += 1\n",
        ),
        # a poll sees a job's end from its time on, not before
        (
            "if code == NO_RESULT or lclu[LK_CLOCK] < lw[s, W_DONE_AT]:",
            "if code == NO_RESULT:",
        ),
        # the fork's time is the poll's
        ("            lw[s, W_FORKED_AT] = ln[L_CLOCK]\n", "            lw[s, W_FORKED_AT] = 0\n"),
        # a shutdown with failed stop jobs keeps its lock and watchdog
        ("            if ln[L_ERRORS] == 0:\n", "            if True:\n"),
    ],
)
def test_mutated_lrm_transition_is_reported(original: str, mutant: str) -> None:
    source = _lrm_source()
    assert source.count(original) == 1, original
    broken = differential.plain_module("lrm", source.replace(original, mutant))
    first = next(
        (
            out
            for seed in range(16)
            for out in (differential.run_lrm_example(seed, rounds=60, lrm=broken),)
            if not out.identical
        ),
        None,
    )
    assert first is not None, "the mutant went unnoticed"
    assert first.difference.startswith("seed ")


def test_two_clusters_in_one_call() -> None:
    """The leading cluster axis: the LRMs of two clusters in one call give each one's rounds."""
    cl0 = differential.random_lrm_cluster(np.random.default_rng(5))
    hists = [differential.LrmHistory(cl0, np.random.default_rng(s)) for s in (1, 2)]
    alone = [differential.EngineHA(cl0) for _ in hists]
    both = [differential.EngineHA(cl0) for _ in hists]
    names = ("lnodes", "lwork", "lres", "lcfg", "lclu", "levbuf")
    for _ in range(30):
        inputs = [h.next_lrm() for h in hists]
        snaps = [e.round(i) for e, i in zip(alone, inputs, strict=True)]
        for e, i in zip(both, inputs, strict=True):
            e.lrm = types.SimpleNamespace(publish=lrm.publish, lrm_round=lambda *a: None)
            e.round(i)
        crm_arrays = [
            np.concatenate([getattr(e.crm, n) for e in both]) for n in ("svc", "nodes", "clu")
        ]
        stacked = {n: np.concatenate([getattr(e, n) for e in both]) for n in names}
        lrm.lrm_round(*crm_arrays, *(stacked[n] for n in names))
        for c, e in enumerate(both):
            for n in names:
                getattr(e, n)[...] = stacked[n][c : c + 1]
            rows = e.levbuf[0, : int(e.lclu[0, differential.k.LK_N_EVENTS])]
            lines = lev.format_lrm_events(rows, cl0.sids, cl0.nodes)
            clocks = rows[:, lev.LE_CLOCK].tolist()
            assert [(*x, float(t)) for x, t in zip(lines, clocks, strict=True)] == snaps[c].lrm_log
        for a, b in zip(alone, both, strict=True):
            for n in names:
                assert np.array_equal(getattr(a, n), getattr(b, n)), n


def test_idle_lrm_goes_idle() -> None:
    """A directed example for the path the random ones do not reach in 60 rounds: an active LRM
    whose services moved away releases its lock after ``MAX_ACTIVE_IDLE_ROUNDS`` + 1 rounds."""
    k = differential.k
    cl = differential.Cluster(
        nodes=["node1", "node2"],
        sids=["vm:100"],
        cfg_node=[1],
        cfg_state=[k.CFG_STARTED],
        max_relocate=[1],
        failback=[1],
        rebalance_on_start=False,
    )
    port, engine = differential.PortHA(cl), differential.EngineHA(cl)
    idle = 0
    for r in range(1, 80):
        crm = differential.RoundInput(
            now=r * differential.ROUND_S,
            online=[True, True],
            modes=[k.MODE_ACTIVE] * 2,
            locks=[False, False],
            results=[None],
            commands=[(k.Q_MIGRATE, 0, 0)] if r == 5 else [],
        )
        done = np.zeros((2, 1), dtype=np.int64)  # every job succeeds in its round
        inp = differential.LrmInput(crm, [True, True], [True, True], [True, True], done)
        a, b = port.round(inp), engine.round(inp)
        assert not differential.first_ha_difference(a, b, cl), (r, a, b)
        idle += sum(1 for row in engine.lrm_events if row[0] == lev.LE_IDLE)
    assert idle == 1
