"""Every reproducer of issue 18 ("any input, any kill, any file"), as a regression test: each ends
in exit 2 with one line naming the key (or runs correctly), never a traceback, a hang or a
gigabyte. Model files, traces, run files and tuning kills have their own test modules
(``tests/policies/test_model_file.py``, ``tests/sim/test_trace_source.py``,
``tests/experiments/test_run_files.py``, ``tests/tuning/test_tune_kills.py``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pvegym.errors import ConfigError
from pvegym.tuning.study_config import load_study_config
from tests.conftest import variant

ROOT = Path(__file__).resolve().parents[1]
MAX_LINE = 400  # characters of a one-line error


def refused(result: tuple[int, str, str], *words: str) -> str:
    code, _out, err = result
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and len(err) <= MAX_LINE, err
    for w in words:
        assert w in err, (w, err)
    return err


def sim(cli: Any, *argv: str) -> tuple[int, str, str]:
    return cli("simulate", "--scenario", "failure-loop", "--duration", "1m", *argv)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- non-finite numbers
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400"])
@pytest.mark.parametrize("key", ["nodes[0].maxcpu", "round_s", "duration", "guests[0].maxmem"])
def test_non_finite_scenario_values_are_refused(cli: Any, key: str, value: str) -> None:
    refused(sim(cli, "--set", f"{key}={value}"), key)


def test_a_non_finite_workload_parameter_is_refused(cli: Any) -> None:
    """It used to be accepted: ``simulate --json`` printed NaN, ``run`` died, ``tune`` failed."""
    refused(
        sim(cli, "--set", 'nodes[0].base_cpu={type="ou", mean=inf, sigma=0.1}'),
        "nodes[0].base_cpu.mean",
        "finite",
    )


def test_the_migration_setting_error_names_the_setting_not_another_commands_flag(
    cli: Any,
) -> None:
    err = refused(
        sim(cli, "--set", "migration.downtime_limit_ms=inf"), "migration.downtime_limit_ms"
    )
    assert "--downtime-limit" not in err


EXPERIMENT = """
name = "x"
[report]
bootstrap_resamples = 100
[[scenarios]]
name = "failure-loop"
seeds = [0]
duration = "1m"
[[policies]]
name = "noop"
"""


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (("bootstrap_resamples = 100", "bootstrap_resamples = inf"), "report.bootstrap_resamples"),
        (("bootstrap_resamples = 100", "bootstrap_resamples = nan"), "report.bootstrap_resamples"),
        (("bootstrap_resamples = 100", "bootstrap_resamples = 1e10"), "report.bootstrap_resamples"),
        (('duration = "1m"', "duration = inf"), "scenarios[0].duration"),
        (("seeds = [0]", "seeds = { start = 0, count = 1000000000 }"), "scenarios[0].seeds.count"),
        (("seeds = [0]", "seeds = [-1]"), "scenarios[0].seeds[0]"),
        (('name = "x"', 'name = "x"\noutput = "ok\\u0000"'), "output"),
        (('name = "x"', f'name = "x"\noutput = "{"o" * 300}"'), "output"),
    ],
)
def test_experiment_file_values(
    cli: Any, tmp_path: Path, change: tuple[str, str], key: str
) -> None:
    (tmp_path / "e.toml").write_text(variant(EXPERIMENT, change))
    refused(cli("run", str(tmp_path / "e.toml"), "--out", str(tmp_path / "out")), key)
    assert not (tmp_path / "out").exists()


STUDY = """
name = "s"
n_trials = 2
[policy]
name = "patched"
[params.min_improvement]
low = 0.0
high = 0.3
[[objectives]]
metric = "moves"
[[train]]
name = "failure-loop"
seeds = [0]
duration = "1m"
[[test]]
name = "failure-loop"
seeds = [1]
duration = "1m"
"""


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (("n_trials = 2", "n_trials = inf"), "n_trials"),
        (("n_trials = 2", "n_trials = nan"), "n_trials"),
        (("n_trials = 2", "n_trials = 1e12"), "n_trials"),
        (('duration = "1m"', "duration = inf"), "train[0].duration"),
        (("high = 0.3", "high = inf"), "params.min_improvement.high"),
    ],
)
def test_study_file_values(tmp_path: Path, change: tuple[str, str], key: str) -> None:
    (tmp_path / "s.toml").write_text(variant(STUDY, change))
    with pytest.raises(ConfigError) as err:
        load_study_config(tmp_path / "s.toml")
    assert key in str(err.value) and "\n" not in str(err.value)


# --------------------------------------------------------------------------- bounded requests
@pytest.mark.parametrize("value", ["50000", "1e6", "1e9", "1025"])
def test_a_few_bytes_cannot_ask_for_gigabytes(cli: Any, value: str) -> None:
    """``maxcpu = 50000`` built a PSI table of 2.4 GB in 8.5 s, 1e6 asked for 15 GiB, 1e9 hung."""
    refused(sim(cli, "--set", f"nodes[0].maxcpu={value}"), "nodes[0].maxcpu", "1024")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--duration", "1e12s"), ("--duration",)),
        (("--seed", "-1"), ("--seed",)),
        (("--seed", str(2**64)), ("--seed",)),
    ],
)
def test_cli_flags_are_bounded(cli: Any, argv: tuple[str, ...], words: tuple[str, ...]) -> None:
    refused(cli("simulate", "--scenario", "failure-loop", *argv), *words)


def test_duration_needs_a_unit_and_reads_words(cli: Any) -> None:
    """``--duration 5`` was silently 5 s: a string needs its unit; "5 minutes" is five minutes."""
    refused(cli("simulate", "--scenario", "failure-loop", "--duration", "5"), "needs a unit")
    code, out, err = cli(
        "simulate", "--scenario", "failure-loop", "--duration", "5 minutes", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["metrics"]["sim_seconds"] == 300.0


# --------------------------------------------------------------------------- files
@pytest.mark.parametrize("command", ["run", "simulate", "tune", "train", "replay"])
def test_a_file_that_is_not_utf8_is_one_line(cli: Any, tmp_path: Path, command: str) -> None:
    bad = tmp_path / ("bad.json" if command == "replay" else "bad.toml")
    bad.write_bytes(b'name = "\xff\xfe"\n')
    argv = ["simulate", "--scenario", str(bad)] if command == "simulate" else [command, str(bad)]
    refused(cli(*argv), "not UTF-8")


def test_a_fifo_or_a_device_is_not_read(cli: Any, tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo.toml")
    refused(cli("run", str(tmp_path / "fifo.toml")), "not a regular file")
    refused(cli("simulate", "--scenario", "/dev/zero.toml"), "no such scenario file")
    refused(cli("replay", "/dev/zero"), "not a regular file")


# --------------------------------------------------------------------------- records
def _record(tmp_path: Path, cli: Any) -> dict[str, Any]:
    (tmp_path / "e.toml").write_text(EXPERIMENT)
    assert cli("run", str(tmp_path / "e.toml"), "--out", str(tmp_path / "out"), "--quiet")[0] == 0
    path = next((tmp_path / "out" / "records").rglob("*.json"))
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("seed", -1, "seed"),
        ("seed", 2**64, "seed"),
        ("duration", 1e300, "duration"),
        ("duration", "inf", "duration"),
        ("motions", [[0, "vm:999", "node1"]], "unknown guest"),
        ("motions", [["x", 1, 2]], "motions[0]"),
    ],
)
def test_a_record_is_checked_before_it_is_replayed(
    cli: Any, tmp_path: Path, key: str, value: Any, words: str
) -> None:
    doc = _record(tmp_path, cli)
    doc[key] = value
    (tmp_path / "r.json").write_text(json.dumps(doc))
    refused(cli("replay", str(tmp_path / "r.json")), words)


def test_a_record_with_nan_is_not_json(cli: Any, tmp_path: Path) -> None:
    doc = _record(tmp_path, cli)
    text = json.dumps(doc).replace('"duration": 60.0', '"duration": NaN')
    (tmp_path / "r.json").write_text(text)
    refused(cli("replay", str(tmp_path / "r.json")), "NaN")


# --------------------------------------------------------------------------- train files
TRAIN = {
    "name": "t",
    "algo": "PPO",
    "total_timesteps": 64,
    "hyperparams": {"n_steps": 32, "batch_size": 16},
    "env": {"scenario": "small", "episode_seconds": "5 minutes"},
}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("batch_size", 0),
        ("n_epochs", 0),
        ("learning_rate", "abc"),
        ("learning_rate", float("inf")),
        ("gamma", 1.5),
        ("clip_range", -1),
        ("n_steps", 10**9),
        ("ent_coef", float("nan")),
        ("max_grad_norm", 0),
        ("gae_lambda", -0.1),
        ("use_sde", True),
        ("target_kl", -1),
        ("stats_window_size", 0),
        ("normalize_advantage", "yes"),
        ("rollout_buffer_class", "RolloutBuffer"),
    ],
)
def test_train_hyperparameters_are_checked_by_value(key: str, value: Any) -> None:
    from pvegym.learning.train_config import parse_train_config

    data = json.loads(json.dumps(TRAIN))
    data["hyperparams"][key] = value
    with pytest.raises(ConfigError) as err:
        parse_train_config(data)
    assert f"hyperparams.{key}" in str(err.value)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"total_timesteps": float("inf")}, "total_timesteps"),
        ({"total_timesteps": 10**12}, "total_timesteps"),
        ({"torch_threads": 1_000_000}, "torch_threads"),
        ({"env": {"scenario": "small", "episode_seconds": float("inf")}}, "env.episode_seconds"),
        ({"algo": "DQN", "hyperparams": {"buffer_size": 10**8}}, "hyperparams.buffer_size"),
        ({"algo": "DQN", "hyperparams": {}}, "hyperparams.buffer_size"),  # SB3's 1e6: 5 GiB
    ],
)
def test_train_sizes_are_bounded(change: dict[str, Any], key: str) -> None:
    from pvegym.learning.train_config import parse_train_config

    with pytest.raises(ConfigError) as err:
        parse_train_config({**TRAIN, **change})
    assert key in str(err.value)


def test_episode_seconds_in_words() -> None:
    from pvegym.learning.train_config import parse_train_config

    assert parse_train_config(TRAIN).env.episode_seconds == 300.0


# --------------------------------------------------------------------------- messages
def test_error_messages_name_the_file_and_cut_long_values(cli: Any, tmp_path: Path) -> None:
    scn = tmp_path / "big.toml"
    scn.write_text(
        'name = "b"\n[[nodes]]\nname = "n1"\nmaxcpu = 4\nmaxmem = "' + "9" * 100_000 + 'GiB"\n'
    )
    err = refused(cli("simulate", "--scenario", str(scn)), "big.toml", "nodes[0].maxmem")
    assert "characters)" in err  # the 100,000-digit value is cut


# --------------------------------------------------------------------------- storages
@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("sqlite:////etc/passwd", "not an SQLite database"),
        ("sqlite:///{tmp}/garbage.db", "not an SQLite database"),
        ("sqlite:///{tmp}/truncated.db", "cannot use"),
        ("sqlite:///{tmp}", "not a regular file"),
        ("sqlite://", "in-memory"),
        ("postgresql+psycopg://u:p@127.0.0.1:9/db", "cannot use"),
        ("nonsense", "cannot use"),
        ("", "is empty"),  # found by the long fuzz run: it wrote results/<study>/study.db
    ],
)
def test_bad_study_storages_are_one_line(cli: Any, tmp_path: Path, url: str, words: str) -> None:
    (tmp_path / "s.toml").write_text(STUDY)
    (tmp_path / "garbage.db").write_bytes(bytes(range(256)) * 16)
    good = tmp_path / "good.db"
    con = sqlite3.connect(good)
    con.execute("create table t (x)")
    con.executemany("insert into t values (?)", [(i,) for i in range(5000)])
    con.commit()
    con.close()
    blob = good.read_bytes()
    (tmp_path / "truncated.db").write_bytes(blob[: len(blob) // 3])
    argv = ("tune", str(tmp_path / "s.toml"), "--storage", url.format(tmp=tmp_path), "--no-report")
    refused(cli(*argv, "--quiet"), "--storage", words)


# --------------------------------------------------------------------------- found by the fuzz suite
@pytest.mark.parametrize("policy", ["noop", "upstream", "patched", "guest-centric"])
def test_a_cluster_without_guests_simulates(cli: Any, policy: str) -> None:
    """A scenario whose guests were all deleted (``guests`` is optional) used to crash in
    auto-ballooning: an empty guest row was float, and ``float & bool`` raised a TypeError."""
    code, out, err = cli(
        "simulate",
        "--scenario",
        "contended-3node",
        "--duration",
        "2m",
        "--set",
        "guests=[]",
        "--policy",
        policy,
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["metrics"]["moves"] == 0
