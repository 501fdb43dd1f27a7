"""The full round ``pvegym bench`` times (:mod:`pvegym.experiments.bench_ha`) is what it says: every
daemon runs in full, the migration stays pending, nothing errs."""

from pvegym.experiments.bench_ha import PENDING, HARoundLoop


def test_round_is_full_with_migration_pending() -> None:
    loop = HARoundLoop()
    _, crm = loop.crms[0]
    assert crm.status["state"] == "master" and crm.manager is not None
    usage_before = crm.manager.online_node_usage
    loop.run(5)
    sid, target = PENDING
    sd = loop.cfs.manager_status["service_status"][sid]
    assert (sd["state"], sd["target"]) == ("migrate", target)
    # a full round rebuilds the usage (no steady-state skip)
    assert crm.manager.online_node_usage is not usage_before
    lines = [line for env, _ in loop.crms + loop.lrms for line in env.lines]
    assert not [line for line in lines if line.startswith(("err", "warn"))]
    # every other service is started and its LRM confirms it every round
    ss = loop.cfs.manager_status["service_status"]
    assert sum(sd["state"] == "started" for sd in ss.values()) == len(ss) - 1
