"""Randomized scenario families: one seeded generator per family, ``(instance_seed) -> scenario``.

A family is a distribution over clusters (``docs/model.md``, *Scenario families*). An *instance seed* picks one cluster
(node sizes, guests, their workloads, rules, events) deterministically; the episode seed of
:class:`~pvegym.sim.simulation.Simulation` then drives the workload noise and the LRM's timing.
Training and evaluation use disjoint instance seeds (:data:`TRAIN_SEEDS`, :data:`TEST_SEEDS`), so
that a learned agent is scored on clusters it never saw; :func:`require_train_seed` refuses a test
seed where a training seed is required.

Every instance has heterogeneous nodes (cores, memory), mixed workloads (constant + OU noise, some
diurnal, some bursts, a few step events), a few guests with local resources (every migration fails
after the precheck), a few containers (relocate = stop, move, start), some positive/negative
resource-affinity rules and, in some instances, a pressure onset: a step up in the demand of the
guests on one node at a random time (marked with a ``pressure-onset`` event for
``evacuation_latency_s``). All guests are HA-managed (what the balancer may move).

Generation is vectorised NumPy plus one dict per guest: ``bench-large`` (64 nodes, 2,000 guests)
builds and validates in a fraction of a second.

The scenario format is the plain-dict format of :mod:`pvegym.sim.scenarios` (units: cores, bytes,
seconds), so overrides and validation work as for named scenarios.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.sim.scenario import EventSpec as _EventSpec
from pvegym.sim.scenario import (
    GuestSpec,
    NodeSpec,
    ResourceAffinitySpec,
    Scenario,
)
from pvegym.sim.workload import Component
from pvegym.units import GiB, MiB

ScenarioData = dict[str, Any]

#: Instance seeds for training (and tuning) — a learned agent may see these.
TRAIN_SEEDS = range(0, 10_000)
#: Instance seeds for evaluation only — disjoint from :data:`TRAIN_SEEDS`.
TEST_SEEDS = range(1_000_000, 1_001_000)


def is_test_seed(seed: int) -> bool:
    return seed in TEST_SEEDS


def require_train_seed(seed: int, path: str = "seed") -> int:
    """Return ``seed`` if it may be used for training; a test seed is a :class:`ConfigError`."""
    if seed in TEST_SEEDS:
        raise ConfigError(
            path,
            f"{seed} is an evaluation (test) seed; training seeds are "
            f"{TRAIN_SEEDS.start}..{TRAIN_SEEDS.stop - 1}",
        )
    return seed


@dataclass(frozen=True)
class FamilySpec:
    """The size distribution of a family: node and guest counts (inclusive ranges)."""

    nodes: tuple[int, int]
    guests: tuple[int, int]
    duration: float = 3600.0  # seconds
    pressure_prob: float = 0.3  # probability that an instance has a pressure onset
    description: str = ""
    train_seeds: range = TRAIN_SEEDS  # instance seeds a learned agent or a study may see
    test_seeds: range = TEST_SEEDS  # instance seeds for evaluation only (disjoint)


FAMILIES: dict[str, FamilySpec] = {
    "small": FamilySpec((2, 4), (5, 40), description="2–4 nodes, 5–40 guests"),
    "medium": FamilySpec((8, 8), (100, 100), description="8 nodes, 100 guests"),
    "bench-small": FamilySpec((8, 8), (64, 64), description="8 nodes, 64 guests (benchmark)"),
    "bench-large": FamilySpec(
        (64, 64), (2000, 2000), description="64 nodes, 2,000 guests (benchmark)"
    ),
    "trace": FamilySpec(
        (2, 8),
        (2, 96),
        duration=7200.0,
        pressure_prob=0.0,
        description="2–8 nodes, guests replaying real VM traces (PlanetLab, Bitbrains) packed to a "
        "drawn target utilisation; disjoint train/test trace sets",
    ),
}

# node sizes (cores, memory GiB) and guest sizes (vCPUs, memory GiB), with weights
_NODE_CORES = np.array([8, 16, 24, 32, 48, 64])
_NODE_MEM_PER_CORE = np.array([2, 4, 4, 8])  # GiB per core
_GUEST_VCPUS = np.array([1, 2, 2, 4, 4, 8])
_GUEST_MEM = np.array([1, 2, 4, 4, 8, 16])  # GiB


def names() -> list[str]:
    return sorted(FAMILIES)


def is_family(name: str) -> bool:
    return name in FAMILIES


def family_max_sizes(name: str) -> tuple[int, int]:
    """``(max_nodes, max_guests)`` of a family: the padding of the environment's spaces."""
    if name not in FAMILIES:
        raise ConfigError("scenario", f"unknown family {name!r} (allowed: {', '.join(names())})")
    spec = FAMILIES[name]
    return spec.nodes[1], spec.guests[1]


def _noise(mean: float, sigma: float, tau: float) -> dict[str, Any]:
    return {"type": "ou", "mean": mean, "sigma": sigma, "tau": tau}


def _node_specs(
    names: list[str], cores: Any, mem_gib: Any, base_cpu: Any, base_mem: Any
) -> list[dict[str, Any]]:
    """Node tables: ``cores``, memory (GiB) and base load (cores, GiB) per node, with light
    OU noise on the base load (10 % of it for CPU over 2 min, 1 % for memory over 10 min)."""
    return [
        {
            "name": names[j],
            "maxcpu": int(cores[j]),
            "maxmem": float(mem_gib[j]) * GiB,
            "base_cpu": [_noise(float(base_cpu[j]), float(0.1 * base_cpu[j]), 120.0)],
            "base_mem": [
                {"type": "constant", "level": float(base_mem[j]) * GiB},
                _noise(0.0, float(0.01 * base_mem[j]) * GiB, 600.0),
            ],
        }
        for j in range(len(names))
    ]


def generate(
    n_nodes: int,
    n_guests: int,
    seed: int,
    name: str = "sized",
    duration: float = 3600.0,
    pressure_prob: float = 0.3,
) -> ScenarioData:
    """A random cluster of ``n_nodes`` nodes and ``n_guests`` guests (plain scenario data).

    The load is drawn so that the mean node CPU utilisation is 35–75 % and memory 30–70 %, with
    guests placed unevenly (a Dirichlet-weighted node choice), so some instances start balanced and
    some with a hot node. Deterministic in ``seed``: the random draws happen in one fixed order
    (node sizes, guests, the pressure onset, affinity pairs, base loads).
    """
    if n_nodes < 1 or n_guests < 0:
        raise ConfigError("family", "needs at least one node and no negative guest count")
    rng = np.random.default_rng(np.random.SeedSequence([0x9E3779B9, seed, n_nodes, n_guests]))
    width = max(2, len(str(n_nodes)))
    node_names = [f"node{i + 1:0{width}d}" for i in range(n_nodes)]
    cores = rng.choice(_NODE_CORES, size=n_nodes)
    mem_gib = cores * rng.choice(_NODE_MEM_PER_CORE, size=n_nodes)
    draws = _draw_guests(rng, n_guests, cores, mem_gib)

    # a pressure onset: the guests on one node step up their demand at a random time
    events: list[dict[str, Any]] = []
    hot = -1
    if n_nodes >= 2 and rng.random() < pressure_prob:
        hot = int(rng.integers(n_nodes))
        onset = float(rng.uniform(300, 1800))
        events.append({"t": onset, "type": "pressure-onset", "node": node_names[hot]})
    onset_t = events[0]["t"] if events else 0.0
    guests = [_random_guest(i, draws, node_names, hot, onset_t) for i in range(n_guests)]
    rules = _affinity_pairs(rng, guests, draws["place"], node_names)

    base_cpu = cores * rng.uniform(0.01, 0.05, size=n_nodes)
    base_mem = mem_gib * rng.uniform(0.03, 0.12, size=n_nodes)
    nodes = _node_specs(node_names, cores, mem_gib, base_cpu, base_mem)
    return {
        "name": f"{name}#{seed}",
        "description": f"random cluster: {n_nodes} nodes, {n_guests} guests (seed {seed})",
        "duration": duration,
        "nodes": nodes,
        "guests": guests,
        "resource_affinity": rules,
        "events": events,
    }


def _draw_guests(
    rng: np.random.Generator, n_guests: int, cores: NDArray[Any], mem_gib: NDArray[Any]
) -> dict[str, NDArray[Any]]:
    """Every per-guest random draw of :func:`generate`, in its fixed order: sizes, an uneven
    placement, demand scaled to a drawn mean utilisation, workload components, migration inputs."""
    n_nodes = cores.size
    # guests: sizes, then a placement weighted towards some nodes (uneven start)
    vcpus = rng.choice(_GUEST_VCPUS, size=n_guests)
    gmem = rng.choice(_GUEST_MEM, size=n_guests).astype(float)
    weights = rng.dirichlet(np.full(n_nodes, 2.0)) * cores
    weights /= weights.sum()
    place = rng.choice(n_nodes, size=n_guests, p=weights)

    # target mean utilisation → scale guest demand so Σ demand ≈ util × Σ cores
    util = rng.uniform(0.35, 0.75)
    mem_util = rng.uniform(0.30, 0.70)
    share = rng.uniform(0.1, 0.9, size=n_guests) * vcpus
    cpu_level = share * (util * cores.sum() / max(share.sum(), 1e-9))
    cpu_level = np.minimum(cpu_level, 0.9 * vcpus)
    mem_share = rng.uniform(0.4, 0.95, size=n_guests) * gmem
    mem_scale = min(1.0, mem_util * mem_gib.sum() / max(mem_share.sum(), 1e-9))
    memhost_gib = np.maximum(mem_share * mem_scale, 0.25)
    gmem = np.maximum(gmem, np.ceil(memhost_gib))
    d: dict[str, NDArray[Any]] = {
        "vcpus": vcpus,
        "place": place,
        "cpu_level": cpu_level,
        "memhost_gib": memhost_gib,
        "gmem": gmem,
    }
    d["ou_sigma"] = cpu_level * rng.uniform(0.05, 0.3, size=n_guests)
    d["ou_tau"] = rng.choice([30.0, 60.0, 120.0, 300.0], size=n_guests)
    d["has_diurnal"] = rng.random(n_guests) < 0.4
    d["diurnal_amp"] = cpu_level * rng.uniform(0.1, 0.5, size=n_guests)
    d["diurnal_phase"] = rng.uniform(0, 86400, size=n_guests)
    d["diurnal_period"] = rng.choice([3600.0, 86400.0], size=n_guests)
    d["has_bursts"] = rng.random(n_guests) < 0.25
    d["burst_rate"] = rng.uniform(0.5, 4.0, size=n_guests)
    d["burst_height"] = vcpus * rng.uniform(0.2, 0.6, size=n_guests)
    d["burst_dur"] = rng.choice([30.0, 60.0, 180.0], size=n_guests)
    d["has_step"] = rng.random(n_guests) < 0.05
    d["step_t"] = rng.uniform(300, 3000, size=n_guests)
    d["step_v"] = vcpus * rng.uniform(-0.3, 0.5, size=n_guests)
    d["mem_ratio"] = rng.uniform(0.6, 1.0, size=n_guests)
    d["dirty"] = rng.choice([5.0, 20.0, 50.0, 150.0], size=n_guests) * MiB
    d["wws"] = np.minimum(gmem * rng.uniform(0.1, 0.6, size=n_guests), gmem)
    d["sens"] = rng.uniform(0.3, 1.0, size=n_guests)
    d["is_ct"] = rng.random(n_guests) < 0.08
    d["local"] = rng.random(n_guests) < 0.04
    return d


def _random_cpu(i: int, d: dict[str, NDArray[Any]], hot: int, onset_t: float) -> list[Any]:
    """Guest ``i``'s CPU demand signal (cores): a level, OU noise, maybe a diurnal cycle, bursts,
    a step, and the step up of a pressure onset on node ``hot`` at ``onset_t``."""
    cpu: list[dict[str, Any]] = [
        {"type": "constant", "level": float(d["cpu_level"][i])},
        _noise(0.0, float(d["ou_sigma"][i]), float(d["ou_tau"][i])),
    ]
    if d["has_diurnal"][i]:
        cpu.append(
            {
                "type": "diurnal",
                "amplitude": float(d["diurnal_amp"][i]),
                "period": float(d["diurnal_period"][i]),
                "phase": float(d["diurnal_phase"][i]),
            }
        )
    if d["has_bursts"][i]:
        cpu.append(
            {
                "type": "bursts",
                "rate_per_hour": float(d["burst_rate"][i]),
                "height": float(d["burst_height"][i]),
                "duration": float(d["burst_dur"][i]),
            }
        )
    if d["has_step"][i]:
        cpu.append({"type": "steps", "at": [[float(d["step_t"][i]), float(d["step_v"][i])]]})
    if d["place"][i] == hot:
        cpu.append({"type": "steps", "at": [[onset_t, float(0.5 * d["vcpus"][i])]]})
    return cpu


def _random_guest(
    i: int, d: dict[str, NDArray[Any]], node_names: list[str], hot: int, onset_t: float
) -> dict[str, Any]:
    """Guest ``i`` of :func:`generate` as plain scenario data (no random draws of its own)."""
    is_ct = bool(d["is_ct"][i])
    host = float(d["memhost_gib"][i]) * GiB
    return {
        "sid": f"{'ct' if is_ct else 'vm'}:{100 + i}",
        "node": node_names[d["place"][i]],
        "maxcpu": int(d["vcpus"][i]),
        "maxmem": float(d["gmem"][i]) * GiB,
        "cpu": _random_cpu(i, d, hot, onset_t),
        "memhost": [
            {"type": "constant", "level": host},
            _noise(0.0, 0.02 * host, 600.0),
        ],
        "mem_ratio": float(d["mem_ratio"][i]),
        "dirty_rate": 0.0 if is_ct else float(d["dirty"][i]),
        "wws": float(d["wws"][i]) * GiB,
        "throttle_sensitivity": float(d["sens"][i]),
        "local_resources": bool(d["local"][i]),
    }


def _affinity_pairs(
    rng: np.random.Generator,
    guests: list[dict[str, Any]],
    place: NDArray[Any],
    node_names: list[str],
) -> list[dict[str, Any]]:
    """A few positive pairs (moved to one node) and negative pairs (moved apart) among
    ``guests``, whose start nodes this adjusts in place."""
    n_nodes, n_guests = len(node_names), len(guests)
    rules: list[dict[str, Any]] = []
    n_rules = min(n_guests // 10, 8)
    if n_nodes < 2 or n_guests < 4:
        return rules
    n_rules = max(n_rules, 1)
    order = rng.permutation(n_guests)
    used = 0
    for r in range(n_rules):
        if used + 2 > n_guests:
            break
        a, b = int(order[used]), int(order[used + 1])
        used += 2
        pair = [guests[a]["sid"], guests[b]["sid"]]
        if r % 2 == 0:  # positive: keep together, start together
            guests[b]["node"] = guests[a]["node"]
            rules.append({"name": f"pos{r}", "resources": pair, "affinity": "positive"})
        else:  # negative: keep apart, start apart
            if guests[a]["node"] == guests[b]["node"]:
                other = (place[a] + 1) % n_nodes
                guests[b]["node"] = node_names[other]
            rules.append({"name": f"neg{r}", "resources": pair, "affinity": "negative"})
    return rules


# --------------------------------------------------------------------------------------------
# the ``trace`` family: guests replaying real VM traces (pvegym/data/traces)

#: Target mean CPU utilisation of a ``trace`` instance (Σ expected demand / Σ cores), drawn per
#: instance: from comfortably loaded to tight, so that the uneven placement leaves some nodes hot.
TRACE_UTIL = (0.5, 0.9)
#: Node memory a ``trace`` instance fills at most at placement (fraction of ``maxmem``).
TRACE_MEM_FILL = 0.8
_TRACE_NODE_CORES = np.array([8, 16, 24, 32])
_TRACE_MEM_PER_CORE = np.array([4, 8])  # GiB per core


def trace_sets() -> dict[str, tuple[str, ...]]:
    """The disjoint ``train`` and ``test`` trace sets of the ``trace`` family (trace sources).

    Split by trace, not only by seed, so that a policy tuned or trained on ``trace`` is evaluated
    on VMs whose series it never saw: PlanetLab day 2011-03-03 trains and 2011-03-22 tests (other
    slivers, another day); Bitbrains VMs alternate by sorted id (even ranks train, odd test). The
    single-VM Bitbrains file (memory series) is in neither set.
    """
    from pvegym.sim.workload import TRACE_ROOT

    pl = sorted(f.name for f in (TRACE_ROOT / "planetlab").iterdir() if f.name[:8].isdigit())
    bb = sorted(f.stem for f in (TRACE_ROOT / "bitbrains").glob("*.csv") if f.stem != "single-vm")
    bb.sort(key=int)
    train = [f"planetlab/{n}" for n in pl if n.startswith("20110303_")]
    train += [f"bitbrains/{v}" for v in bb[0::2]]
    test = [f"planetlab/{n}" for n in pl if n.startswith("20110322_")]
    test += [f"bitbrains/{v}" for v in bb[1::2]]
    return {"train": tuple(train), "test": tuple(test)}


def trace_split(instance_seed: int) -> str:
    """``"test"`` for an evaluation seed (:data:`TEST_SEEDS`), else ``"train"``."""
    return "test" if is_test_seed(instance_seed) else "train"


def generate_traced(
    instance_seed: int, name: str = "trace", duration: float = 7200.0
) -> ScenarioData:
    """An instance of the ``trace`` family (plain scenario data), deterministic in the seed.

    2–8 nodes (8–32 cores, 4–8 GiB per core); a target utilisation ``u`` drawn from
    :data:`TRACE_UTIL`; guests are added one by one — a trace of the seed's split at a random
    5-min-aligned offset, looped, with ``scale`` = its vCPUs (CPU fraction × vCPUs → cores) and a
    little OU noise (10 % of its mean, τ = 60 s) for the sub-5-min variation the samples average
    away — onto a node drawn with Dirichlet-skewed weights (some nodes run hotter than others)
    among those with memory room (≤ :data:`TRACE_MEM_FILL`), until Σ of the guests' mean demand
    over the episode reaches ``u`` × Σ cores (or 96 guests). Memory, dirty rates, containers,
    local resources and negative-affinity pairs are drawn as in :func:`generate`.
    """
    from pvegym.sim.workload import load_trace

    spec = FAMILIES["trace"]
    pool = trace_sets()[trace_split(instance_seed)]
    rng = np.random.default_rng(np.random.SeedSequence([0x7ACE, instance_seed]))
    n_nodes = int(rng.integers(spec.nodes[0], spec.nodes[1] + 1))
    node_names = [f"node{i + 1:02d}" for i in range(n_nodes)]
    cores = rng.choice(_TRACE_NODE_CORES, size=n_nodes)
    mem_gib = cores * rng.choice(_TRACE_MEM_PER_CORE, size=n_nodes)
    util = float(rng.uniform(*TRACE_UTIL))
    weights = rng.dirichlet(np.full(n_nodes, 1.5)) * cores
    weights /= weights.sum()
    base_cpu = cores * rng.uniform(0.01, 0.05, size=n_nodes)
    base_mem = mem_gib * rng.uniform(0.03, 0.12, size=n_nodes)
    mem_used = base_mem.astype(float).copy()
    goal = util * float(cores.sum())

    guests: list[dict[str, Any]] = []
    place: list[int] = []
    load = 0.0
    while load < goal and len(guests) < spec.guests[1]:
        source = str(pool[int(rng.integers(len(pool)))])
        trace = load_trace(source, "cpu", "", "trace")
        n = trace.values.size
        start = int(rng.integers(n))
        vcpus = (
            int(min(trace.capacity, 8))
            if source.startswith("bitbrains/")
            else int(rng.choice(_GUEST_VCPUS))
        )
        steps = int(np.ceil(duration / trace.interval_s)) + 1
        window = trace.values[(start + np.arange(steps)) % n]
        mean = float(window.mean()) * vcpus
        gmem = float(rng.choice(_GUEST_MEM))
        host = gmem * float(rng.uniform(0.4, 0.9))
        room = mem_used + host <= TRACE_MEM_FILL * mem_gib
        if not room.any():
            break
        w = np.where(room, weights, 0.0)
        j = int(rng.choice(n_nodes, p=w / w.sum()))
        mem_used[j] += host
        load += mean
        cpu = _traced_cpu(source, vcpus, start * trace.interval_s, mean)
        guests.append(_traced_guest(rng, len(guests), node_names[j], vcpus, gmem, host, cpu))
        place.append(j)
    rules = _negative_pairs(rng, guests, place) if n_nodes >= 2 else []
    nodes = _node_specs(node_names, cores, mem_gib, base_cpu, base_mem)
    split = trace_split(instance_seed)
    return {
        "name": f"{name}#{instance_seed}",
        "description": f"traced cluster: {n_nodes} nodes, {len(guests)} guests at "
        f"{util:.0%} target CPU utilisation ({split} traces, seed {instance_seed})",
        "duration": duration,
        "nodes": nodes,
        "guests": guests,
        "resource_affinity": rules,
        "events": [],
    }


def _traced_cpu(source: str, vcpus: int, offset_s: float, mean: float) -> list[dict[str, Any]]:
    """A traced guest's CPU demand: the trace from ``offset_s``, looped, scaled to its vCPUs, plus
    OU noise of 10 % of its ``mean`` demand (cores) for what the 5-min samples average away."""
    return [
        {
            "type": "trace",
            "source": source,
            "scale": float(vcpus),
            "offset": float(offset_s),
            "loop": True,
        },
        _noise(0.0, 0.1 * mean, 60.0),
    ]


def _traced_guest(
    rng: np.random.Generator,
    i: int,
    node: str,
    vcpus: int,
    gmem: float,
    host: float,
    cpu: list[dict[str, Any]],
) -> dict[str, Any]:
    """Guest ``i`` of a ``trace`` instance (``gmem``, ``host`` in GiB); its kind, dirty rate,
    balloon ratio, working set, throttle sensitivity and local resources drawn in this order."""
    is_ct = bool(rng.random() < 0.08)
    dirty = float(rng.choice([5.0, 20.0, 50.0, 150.0])) * MiB
    return {
        "sid": f"{'ct' if is_ct else 'vm'}:{100 + i}",
        "node": node,
        "maxcpu": vcpus,
        "maxmem": gmem * GiB,
        "cpu": cpu,
        "memhost": [
            {"type": "constant", "level": host * GiB},
            _noise(0.0, 0.02 * host * GiB, 600.0),
        ],
        "mem_ratio": float(rng.uniform(0.6, 1.0)),
        "dirty_rate": 0.0 if is_ct else dirty,
        "wws": gmem * float(rng.uniform(0.1, 0.6)) * GiB,
        "throttle_sensitivity": float(rng.uniform(0.3, 1.0)),
        "local_resources": bool(rng.random() < 0.05),
    }


def _negative_pairs(
    rng: np.random.Generator, guests: list[dict[str, Any]], place: list[int]
) -> list[dict[str, Any]]:
    """A few negative-affinity pairs of a ``trace`` instance, among guests that start on
    different nodes (none with fewer than 4 guests)."""
    rules: list[dict[str, Any]] = []
    if len(guests) < 4:
        return rules
    order = rng.permutation(len(guests))
    for r in range(min(len(guests) // 12 + 1, 4)):
        a, b = int(order[2 * r]), int(order[2 * r + 1])
        if place[a] == place[b]:
            continue
        rules.append(
            {
                "name": f"neg{r}",
                "resources": [guests[a]["sid"], guests[b]["sid"]],
                "affinity": "negative",
            }
        )
    return rules


def family_data(name: str, instance_seed: int) -> ScenarioData:
    """Plain scenario data of instance ``instance_seed`` of family ``name``."""
    family_max_sizes(name)  # validates the name
    spec = FAMILIES[name]
    if name == "trace":
        return generate_traced(instance_seed, name, spec.duration)
    rng = np.random.default_rng(np.random.SeedSequence([0x5EED, instance_seed]))
    n_nodes = int(rng.integers(spec.nodes[0], spec.nodes[1] + 1))
    n_guests = int(rng.integers(spec.guests[0], spec.guests[1] + 1))
    return generate(n_nodes, n_guests, instance_seed, name, spec.duration, spec.pressure_prob)


def _signal(items: list[dict[str, Any]]) -> tuple[Component, ...]:
    return tuple(
        Component(**{**c, "at": tuple(tuple(p) for p in c["at"])}) if "at" in c else Component(**c)
        for c in items
    )


def build_scenario(data: ScenarioData) -> Scenario:
    """The :class:`Scenario` of data made by :func:`generate`, without the generic loader.

    ``pvegym.config.load`` re-resolves type hints for every component, which costs ~1.4 ms per
    guest (2.8 s for ``bench-large``); the generator's output is valid by construction, so the
    dataclasses are built directly and only the cross-reference checks (``Scenario.validate``) run.
    ``tests/sim/test_families.py`` checks that this equals ``scenario_from_dict(data)``.
    """
    nodes = tuple(
        NodeSpec(
            name=n["name"],
            maxcpu=n["maxcpu"],
            maxmem=n["maxmem"],
            base_cpu=_signal(n["base_cpu"]),
            base_mem=_signal(n["base_mem"]),
        )
        for n in data["nodes"]
    )
    guests = tuple(
        GuestSpec(**{**g, "cpu": _signal(g["cpu"]), "memhost": _signal(g["memhost"])})
        for g in data["guests"]
    )
    rules = tuple(
        ResourceAffinitySpec(r["name"], tuple(r["resources"]), r["affinity"])
        for r in data["resource_affinity"]
    )
    events = tuple(_EventSpec(**e) for e in data["events"])
    scn = Scenario(
        name=data["name"],
        description=data["description"],
        duration=float(data["duration"]),
        nodes=nodes,
        guests=guests,
        resource_affinity=rules,
        events=events,
    )
    scn.validate("")
    return scn


def family_scenario(name: str, instance_seed: int) -> Scenario:
    """The validated :class:`Scenario` of instance ``instance_seed`` of family ``name``."""
    return build_scenario(family_data(name, instance_seed))
