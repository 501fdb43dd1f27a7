"""``pvegym simulate`` and the scenario layer: determinism and one-line errors with exit code 2."""

import json
from pathlib import Path

import pytest

from pvegym.sim.metrics import METRIC_KEYS
from tests.conftest import RunCli


def test_json_has_every_metric_and_is_byte_identical_for_a_seed(
    cli: RunCli,
) -> None:
    args = (
        "simulate",
        "--scenario",
        "contended-3node",
        "--duration",
        "10m",
        "--seed",
        "4",
        "--json",
    )
    code, first, _ = cli(*args)
    assert code == 0
    _, second, _ = cli(*args)
    assert first == second
    doc = json.loads(first)
    assert set(doc) == {"scenario", "policy", "seed", "metrics", "moves"}
    assert set(doc["metrics"]) == set(METRIC_KEYS)
    assert doc["metrics"]["sim_seconds"] == 600
    assert doc["metrics"]["stall_cpu_s"] > 0  # node1 of contended-3node is overloaded


def test_different_seeds_give_different_workloads(cli: RunCli) -> None:
    outs = []
    for seed in ("1", "2"):
        _, out, _ = cli(
            "simulate",
            "--scenario",
            "contended-3node",
            "--duration",
            "10m",
            "--seed",
            seed,
            "--json",
        )
        outs.append(json.loads(out)["metrics"])
    assert outs[0]["cpu_shortfall_core_s"] != outs[1]["cpu_shortfall_core_s"]


def test_human_summary(cli: RunCli) -> None:
    code, out, _ = cli("simulate", "--scenario", "idle-night", "--duration", "1h")
    assert code == 0
    assert "scenario idle-night" in out
    for key in METRIC_KEYS:  # every registered metric has a line
        assert f"  {key} " in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--scenario", "no-such-scenario"], "--scenario: unknown scenario 'no-such-scenario'"),
        (
            ["--scenario", "idle-night", "--set", "nodes[0].maxmem=-1GiB"],
            "nodes[0].maxmem: must be > 0",
        ),
        (["--scenario", "idle-night", "--set", "nodez=1"], "nodez: unknown key (allowed:"),
        (
            ["--scenario", "idle-night", "--set", "guests[0].node=node9"],
            "guests[0].node: unknown node 'node9'",
        ),
        (["--scenario", "idle-night", "--set", "psi.cpu_blend=1.5"], "psi.cpu_blend: must be ≤ 1"),
        (
            [
                "--scenario",
                "nonconverging-migration",
                "--set",
                "migration.qemu_server=patched",
                "--set",
                "migration.abort_factor=1.2",
            ],
            "migration.abort_factor: must be larger than boost_factor (1.5)",
        ),
        (["--scenario", "idle-night", "--policy", "magic"], "--policy: unknown policy 'magic'"),
        (["--scenario", "idle-night", "--duration", "5 fortnights"], "--duration"),
        (["--scenario", "idle-night", "--seed", "x"], "--seed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    cli: RunCli, argv: list[str], fragment: str | None
) -> None:
    code, _, err = cli("simulate", *argv)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    if fragment:
        assert fragment in err


def test_negative_memory_signal_is_rejected(cli: RunCli, tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('name = "bad"\n[[nodes]]\nname = "n1"\nmaxcpu = 4\nmaxmem = "-8GiB"\n')
    code, _, err = cli("simulate", "--scenario", str(f))
    assert code == 2 and "nodes[0].maxmem: must be > 0" in err


def test_scenario_file_runs(cli: RunCli, tmp_path: Path) -> None:
    f = tmp_path / "mini.toml"
    f.write_text(
        'name = "mini"\nduration = "5m"\n'
        '[[nodes]]\nname = "n1"\nmaxcpu = 4\nmaxmem = "8GiB"\n'
        '[[guests]]\nsid = "vm:100"\nnode = "n1"\nmaxcpu = 2\nmaxmem = "2GiB"\ncpu = 1.5\nmemhost = "1GiB"\n'
    )
    code, out, _ = cli("simulate", "--scenario", str(f), "--json")
    assert code == 0 and json.loads(out)["metrics"]["sim_seconds"] == 300


def test_a_family_instance_simulates(cli: RunCli) -> None:
    """``--scenario small --seed 3``: instance 3 of the family, episode seed 3."""
    code, out, err = cli(
        "simulate", "--scenario", "small", "--seed", "3", "--duration", "5m", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["scenario"] == "small#3" and doc["metrics"]["sim_seconds"] == 300


def test_scenarios_lists_named_scenarios_and_families_with_splits(cli: RunCli) -> None:
    code, out, _ = cli("scenarios")
    assert code == 0
    assert "failure-loop" in out and "small" in out and "trace" in out
    assert "train seeds 0..9999, test seeds 1000000..1000999" in out


#: issue 34 item 4: each careless input is one line, exit 2, saying what is allowed
@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ["--set", "guests[0].memhost=-1GiB"],
            "guests[0].memhost: a memory footprint cannot be negative: its level (constants + OU "
            "means) must be ≥ 0 bytes, not -1 GiB",
        ),
        (["--set", "guests[0].cpu=-2"], "guests[0].cpu: a CPU demand cannot be negative"),
        (
            ["--set", 'nodes[0].base_mem={type = "ou", mean = "-2GiB", sigma = "1GiB"}'],
            "nodes[0].base_mem: a memory footprint cannot be negative",
        ),
        (["--set", 'nodes[1].base_cpu={type = "constant", level = -1}'], "nodes[1].base_cpu"),
        (["--duration", "40d"], "--duration: must be ≤ 31 d, not 40 d"),
        (["--set", "duration=40d"], "duration: must be ≤ 31 d, not 40 d"),
        (["--set", "migration.bandwidth=-1MiB/s"], "must be > 0 B/s, not -1 MiB/s"),
        (
            ["--set", "guests[9].maxcpu=2"],
            "--set guests[9].maxcpu: index 9 out of range: guests has 8 (allowed: 0..7)",
        ),
        (["--set", "migration[0].x=1"], "migration is not a list: no index [0]"),
        (
            ["--policy", "patched", "--param", "threshhold=0.4"],
            "--param threshhold: unknown parameter of 'patched' (did you mean 'threshold'?",
        ),
        (
            ["--policy", "patched", "--param", "backoff_base_s=-1m"],
            "--param backoff_base_s: must be a finite number >= 0, got -60.0",
        ),
        (
            ["--policy", "patched", "--param", "backoff_base_s=1parsec"],
            "--param backoff_base_s: unknown duration unit in '1parsec'",
        ),
    ],
)
def test_careless_inputs_say_what_is_allowed(cli: RunCli, argv: list[str], fragment: str) -> None:
    code, out, err = cli("simulate", "--scenario", "idle-night", "--duration", "1m", *argv)
    assert code == 2 and not out
    assert err.count("\n") == 1 and "Traceback" not in err
    assert fragment in err, err


def test_a_misspelled_scenario_gets_a_did_you_mean(cli: RunCli) -> None:
    code, _, err = cli("simulate", "--scenario", "failure_loop")
    assert code == 2 and err.count("\n") == 1
    assert (
        "unknown scenario 'failure_loop' (did you mean 'failure-loop'? allowed: one of the" in err
    )
    assert "`pvegym scenarios` lists, or a .toml file)" in err


def test_policy_durations_and_rates_take_units(cli: RunCli) -> None:
    """``--param backoff_base_s=1m`` is 60 s like every other duration (and a plain number is
    seconds); a rate constant takes ``/s``."""
    from pvegym.policies import make_policy

    one_minute = make_policy("patched", param_key="--param", backoff_base_s="1m")
    assert one_minute.config.backoff_base_s == 60.0  # type: ignore[attr-defined]
    assert make_policy("patched", backoff_base_s=60).config == one_minute.config  # type: ignore[attr-defined]
    gc = make_policy("guest-centric", bandwidth_bps="1GiB/s", horizon_s="5 minutes")
    assert gc.config.bandwidth_bps == 2**30 and gc.config.horizon_s == 300.0  # type: ignore[attr-defined]
    code, _, _ = cli(
        "simulate", "--scenario", "idle-night", "--duration", "1m", "--policy", "patched",
        "--param", "backoff_base_s=1m",
    )  # fmt: skip
    assert code == 0
