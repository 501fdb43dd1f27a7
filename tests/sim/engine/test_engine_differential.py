"""The HA engine against the port (issue 31 item 2): a derandomized sample of the differential
check, a mutated engine caught by it, and the engine's independence of the port."""

from __future__ import annotations

import ast
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pvegym.sim.engine import crm, differential
from pvegym.sim.engine import events as ev

ENGINE_DIR = Path(crm.__file__).parent

#: the sample CI runs: seeds and rounds are fixed (``scripts/engine_diff.py`` runs any number)
SAMPLE_SEEDS = range(12)
SAMPLE_ROUNDS = 60


def _crm_source() -> str:
    return (ENGINE_DIR / "crm.py").read_text()


def test_sample_identical_and_features_exercised() -> None:
    features: Counter[str] = Counter()
    for seed in SAMPLE_SEEDS:
        out = differential.run_example(seed, rounds=SAMPLE_ROUNDS)
        assert out.identical, out.difference
        assert out.rounds == SAMPLE_ROUNDS
        features.update(out.features)
    # each covered feature occurs in the sample (counts: scripts/engine_diff.py)
    for name in (
        "fence_ack",
        "recover",
        "recover_failed",
        "start_failed",
        "recovery_policy_failed",
        "tried_all",
        "node maintenance",
        "back_from_maint",
        "got_disarm",
        "freezing",
        "disarm_suspend",
        "all_disarmed",
        "defer",
        "got_arm",
        "arm_update_node",
        "got_stop",
        "got_motion",
        "auto_rebalance",
        "rebalance_selected",
        "master_offline",
        "remove_stale",
        # rules, groups, CRS modes (tests/sim/engine/test_engine_rules.py for their mutants)
        "drop_rule",
        "negative_refused",
        "positive_partner",
        "crs_mode",
        "groups migration aborted",
        "strict rule restricted a placement",
        "failback",
        "static score not basic's choice",
        "dynamic score not basic's choice",
        *tuple(f"state {s}" for s in differential.k.SERVICE_STATES[1:]),
    ):
        assert features[name] > 0, name


def test_plain_python_engine_is_the_compiled_one() -> None:
    """Control for the mutants: the unmutated source run as plain Python is identical too."""
    plain = differential.plain_module("crm", _crm_source())
    for seed in range(3):
        out = differential.run_example(seed, rounds=40, crm=plain)
        assert out.identical, out.difference


@pytest.mark.parametrize(
    ("original", "mutant"),
    [
        # a failed stop leads to 'error', not 'stopped'
        (
            "        _ev(evbuf, clu, ev.E_STOP_FAILED, s, res, -1)\n"
            "        _change0(svc, nodes, clu, evbuf, s, SS_ERROR)",
            "        _ev(evbuf, clu, ev.E_STOP_FAILED, s, res, -1)\n"
            "        _change0(svc, nodes, clu, evbuf, s, SS_STOPPED)",
        ),
        # the relocate policy's limit is inclusive
        (
            "if svc[s, F_N_FAILED] <= svc[s, F_MAX_RELOCATE]:",
            "if svc[s, F_N_FAILED] < svc[s, F_MAX_RELOCATE]:",
        ),
        # the fence delay
        ("FENCE_DELAY = 60.0", "FENCE_DELAY = 50.0"),
        # (placement, rules and scores: tests/sim/engine/test_engine_rules.py)
    ],
)
def test_mutated_transition_is_reported(original: str, mutant: str) -> None:
    source = _crm_source()
    assert source.count(original) == 1, original
    broken = differential.plain_module("crm", source.replace(original, mutant))
    outcomes = [differential.run_example(seed, rounds=60, crm=broken) for seed in range(6)]
    assert not all(o.identical for o in outcomes)
    first = next(o for o in outcomes if not o.identical)
    assert first.difference.startswith("seed ")


def test_engine_does_not_import_the_port() -> None:
    for path in ENGINE_DIR.glob("*.py"):
        if path.name == "differential.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not any(n.startswith("pvegym.sim.ha") for n in names), path.name


def test_two_clusters_in_one_call() -> None:
    """The leading cluster axis: two clusters in one call give each one's own rounds."""
    rng = np.random.default_rng(5)
    cl = differential.random_cluster(rng)
    hists = [differential.History(cl, np.random.default_rng(s)) for s in (1, 2)]
    alone = [differential.EngineCRM(cl) for _ in hists]
    both = [differential.EngineCRM(cl) for _ in hists]
    names = ("svc", "nodes", "last_online", "clu", "evbuf", "cmds", "ncmd", "now", "deferred")

    def arrays(e: differential.EngineCRM) -> list[np.ndarray]:
        return [getattr(e, n) for n in names] + [e.rx[n] for n in differential.k.RX_ARRAYS]

    for _ in range(40):
        inputs = [h.next() for h in hists]
        logs = [e.round(i).log for e, i in zip(alone, inputs, strict=True)]
        # load the inputs as EngineCRM.round does, then one call over the stacked arrays
        for e, i in zip(both, inputs, strict=True):
            e.crm = types.SimpleNamespace(manage=lambda *a: None)
            e.round(i)
        stacked = [np.concatenate(group) for group in zip(*map(arrays, both), strict=True)]
        crm.manage(*stacked)
        for c, e in enumerate(both):
            for mine, all_ in zip(arrays(e), stacked, strict=True):
                mine[...] = all_[c : c + 1]
            e.rules.after_round(e.rx, 0)
            rows = e.evbuf[0, : int(e.clu[0, differential.k.K_N_EVENTS])]
            assert ev.format_events(rows, cl.sids, cl.nodes, e.rules.messages) == logs[c]
        for a, b in zip(alone, both, strict=True):
            assert np.array_equal(a.svc, b.svc) and np.array_equal(a.nodes, b.nodes)
