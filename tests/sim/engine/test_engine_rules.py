"""The engine's rules, HA groups and CRS modes against the port (issue 31 items 1 and 2).

* the compile (:func:`pvegym.sim.engine.rules.compile_rules`) equals the port's groups migration,
  ``Rules::transform`` and ``Rules::compile`` on random configs;
* a deliberately broken rule, placement or score decision of the engine is reported by the
  differential check (the engine's modules run as plain Python, so a mutant needs no compilation).
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pvegym.sim.engine import codes as k
from pvegym.sim.engine import crm, differential
from pvegym.sim.engine import rules as er
from pvegym.sim.ha.groups import Groups, migrate_groups_to_resources, migrate_groups_to_rules
from pvegym.sim.ha.rules import Rules

ENGINE_DIR = Path(crm.__file__).parent

# ---------------------------------------------------------------------------- the compile


def _port_compile(
    cl: differential.Cluster, listed: list[str]
) -> tuple[np.ndarray, np.ndarray, list[str], list[int]]:
    """What the port's Manager compiles for ``cl`` with the node status ``listed``."""
    rules = Rules.parse_config("rules.cfg", differential.rules_config_text(cl.rules))
    groups = Groups.parse_config("groups.cfg", differential.groups_config_text(cl.rules))
    sc: dict[str, dict[str, object]] = {
        sid: {"failback": cl.failback[i]} for i, sid in enumerate(cl.sids)
    }
    for sid, gid in cl.rules.service_groups:
        sc[sid]["group"] = gid
    migrate_groups_to_resources(groups, sc)  # type: ignore[arg-type]
    migrate_groups_to_rules(rules, groups, sc)  # type: ignore[arg-type]
    messages = [m.rstrip("\n") for m in Rules.transform(rules, listed)]
    compiled = Rules.compile(rules, listed)
    ns, nn = len(cl.sids), len(cl.nodes)
    prio = np.full((ns, nn), k.NA_OUT, dtype=np.int64)
    for sid, entry in compiled["node-affinity"].items():
        if sid in cl.sids:
            for node, p in entry["nodes"].items():
                if node in cl.nodes:
                    prio[cl.sids.index(sid), cl.nodes.index(node)] = p["priority"]
    pair = np.zeros((ns, ns), dtype=np.int64)
    for kind, bit in (("positive", k.PAIR_POSITIVE), ("negative", k.PAIR_NEGATIVE)):
        for sid, partners in compiled["resource-affinity"][kind].items():  # type: ignore[literal-required]
            for csid in partners:
                if sid in cl.sids and csid in cl.sids:
                    pair[cl.sids.index(sid), cl.sids.index(csid)] |= bit
    failback = [int(sc[sid]["failback"]) for sid in cl.sids]  # type: ignore[call-overload]
    return prio, pair, messages, failback


def test_compile_is_the_ports() -> None:
    drops = 0
    for seed in range(150):
        rng = np.random.default_rng(seed)
        cl = differential.random_cluster(rng)
        listed = [n for n in cl.nodes if rng.random() < 0.8] or cl.nodes[:1]
        prio, pair, messages, failback = _port_compile(cl, listed)
        got = er.compile_rules(cl.rules, cl.sids, cl.nodes, listed, cl.failback)
        assert got.messages == messages, seed
        assert np.array_equal(got.prio, prio), seed
        assert np.array_equal(got.pair, pair), seed
        assert got.failback.tolist() == failback, seed
        assert np.array_equal(got.svc[:, k.RS_HAS_NA] == 1, (prio != k.NA_OUT).any(axis=1))
        drops += len(messages)
    assert drops > 100  # the checks are exercised: 622 drop lines in 90 of the 150 configs


def test_bad_config_is_refused() -> None:
    bad = er.RulesConfig(service_groups=(("vm:100", "nope"),))
    with pytest.raises(ValueError, match="no group 'nope'"):
        er.RulesHost(bad, ("vm:100",), ("node1",), (1,))


# ---------------------------------------------------------------------------- mutants


def _plain_engine(mutate: str, original: str, mutant: str) -> tuple[types.ModuleType, ...]:
    """(crs, rules, crm) as plain Python, ``original`` replaced by ``mutant`` in ``mutate``."""
    sources = {n: (ENGINE_DIR / f"{n}.py").read_text() for n in ("crs", "rules", "crm")}
    if original:
        assert sources[mutate].count(original) == 1, original
        sources[mutate] = sources[mutate].replace(original, mutant)
    pcrs = differential.plain_module("crs", sources["crs"])
    prules = differential.plain_module("rules", sources["rules"], ecrs=pcrs)
    pcrm = differential.plain_module("crm", sources["crm"], ecrs=pcrs, erules=prules)
    return pcrs, prules, pcrm


def _outcomes(seeds: range, crm_module: types.ModuleType) -> Iterator[differential.Outcome]:
    for seed in seeds:
        yield differential.run_example(seed, rounds=60, crm=crm_module)


def test_plain_python_engine_is_the_compiled_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control for the mutants: the unmutated modules as plain Python are identical too."""
    _, prules, pcrm = _plain_engine("rules", "", "")
    monkeypatch.setattr(differential, "er", prules)
    for out in _outcomes(range(3), pcrm):
        assert out.identical, out.difference


@pytest.mark.parametrize(
    ("module", "original", "mutant"),
    [
        # node affinity: the highest priority among the allowed nodes is preferred
        ("rules", "and rprio[s, n] == best else 0", "and rprio[s, n] >= 0 else 0"),
        # a negative partner on the target refuses the motion
        (
            "rules",
            "if node >= 0 and node != target:",
            "if node >= 0 and node == target:",
        ),
        # positive partners: ties between nodes go to the first by name
        ("rules", "count > rnode[major, RN_TOGETHER]", "count >= rnode[major, RN_TOGETHER]"),
        # the pending compile is taken over when the node list changed
        (
            "rules",
            "if rk[RK_COMPILED] and not nodelist_changed and not rk[RK_CONFIG_CHANGED]:",
            "if rk[RK_COMPILED] and not rk[RK_CONFIG_CHANGED]:",
        ),
        # the groups migration's cooldown
        ("rules", "GROUP_MIGRATION_COOLDOWN_ROUNDS = 6", "GROUP_MIGRATION_COOLDOWN_ROUNDS = 5"),
        # placement ties break by node name
        (
            "rules",
            "fnode[nodes[j - 1, N_ORDER], FN_SCORE] > fnode[n, FN_SCORE]",
            "fnode[nodes[j - 1, N_ORDER], FN_SCORE] >= fnode[n, FN_SCORE]",
        ),
        # the TOPSIS weights of the static and dynamic scores
        (
            "crs",
            "_W = tuple(-w for w in PVE_TOPSIS_WEIGHTS)",
            "_W = tuple(-w for w in PVE_TOPSIS_WEIGHTS[:2] + PVE_TOPSIS_WEIGHTS[:1:-1])",
        ),
        # dynamic mode counts the services that are not running yet
        ("crs", "if not static and running:", "if not static and not running:"),
        # the compile: a non-strict rule adds the other nodes at -1 (a strict one does not)
        ("rules", 'if not rd["strict"]:', "if True:"),
        # the compile: a resource-affinity rule needs two resources
        ("rules", 'if len(r["resources"]) < 2)', 'if len(r["resources"]) < 1)'),
        # the compile: a group's nofailback sets failback 0
        ("rules", "(0 if groups[svc_group[sid]].nofailback else 1)", "1"),
    ],
)
def test_mutated_decision_is_reported(
    module: str, original: str, mutant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, prules, pcrm = _plain_engine(module, original, mutant)
    monkeypatch.setattr(differential, "er", prules)
    first = next((o for o in _outcomes(range(40), pcrm) if not o.identical), None)
    assert first is not None, "the mutant went unnoticed"
    assert first.difference.startswith("seed ")
