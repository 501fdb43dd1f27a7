"""The documentation is part of the product: every command line of README.md and docs/ runs, every
example scenario builds, every link and every document named anywhere exists, and the metric table
is the registry's.

Command lines are taken from the fenced blocks and the inline code of README.md and docs/*.md. A
line with a placeholder (``NAME``, ``DIR``, ``[...]``, ``a|b``, ``…``) is a synopsis: its
sub-command and every option it names must exist. Every other ``pvegym`` line runs in-process with
a tiny budget (:func:`tiny`: experiment, study and train files cut to one seed of short episodes
and a few steps, outputs redirected to a temporary directory) and must exit 0. Lines that cannot
run in a test are listed in :data:`EXCLUDED` with the reason, and the few another test already runs
with the same arguments in :data:`COVERED` (checked); a shell line that is neither run nor excused
fails the test, so a new command in the docs is either tested or explicitly excused. ``python -m
pvegym.…`` lines run in a subprocess.

``python tests/test_docs.py --write`` regenerates the metric table of docs/metrics.md.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: where command lines are collected from (the acceptance test's scope: README and docs/)
COMMAND_SOURCES = (ROOT / "README.md", *sorted(DOCS.glob("*.md")))
METRICS_MD = DOCS / "metrics.md"
TABLE_BEGIN = "<!-- metric-table: generated from pvegym.sim.metrics.metric_specs() -->"
TABLE_END = "<!-- end metric-table -->"

#: shell lines that cannot run in a test, by prefix, with the reason
EXCLUDED: dict[str, str] = {
    "bash scripts/test.sh": "the test command itself",
    "bash scripts/main.sh": "creates .venv and installs packages before running the headline "
    "experiment, whose file runs here with a tiny budget (pvegym run experiments/field-scenarios.toml)",
    "bash pve-export.sh": "runs on a Proxmox VE node as root against pvesh; "
    "tests/test_pve_export_script.py runs it against a stub pvesh",
    "pip install": "installs packages (scripts/test.sh installs every extra the tests need)",
    "optuna-dashboard": "a web server",
    "python tests/test_docs.py --write": "rewrites docs/metrics.md's table; "
    "test_metric_table_is_the_registry checks what it would write",
    "ray start": "starts a Ray cluster node (tests/experiments/test_ray_executor.py starts a local "
    "cluster)",
    "ray stop": "stops a Ray cluster node",
    "ray get-auth-token": "needs a running Ray head node",
    "pvegym run experiments/field-scenarios.toml --executor ray:auto": "joins a running Ray "
    "cluster (tests/experiments/test_ray_executor.py runs the executor on a local one)",
    "python -m pvegym.experiments.benchmark_references": "re-simulates every reference and the "
    "oracle on 150 test instances (about half an hour); tests/experiments/test_benchmark.py "
    "re-simulates two instances per task and compares them with the table bit for bit",
    "python -m pvegym.experiments.leaderboard": "scores the committed learned agents on every "
    "task's test split (minutes); tests/experiments/test_benchmark.py checks that pvegym "
    "benchmark's figures equal the committed leaderboard's",
    "pvegym tune experiments/tune-patched.toml --executor ray:auto": "joins a running Ray cluster "
    "and a PostgreSQL server (tests/tuning/test_postgres.py, tests/experiments/test_ray_executor.py)",
}

#: command lines another test already runs exactly (same arguments, same data), by prefix: the
#: test file and the call it must contain (checked, so that the excuse cannot outlive the call)
COVERED: dict[str, tuple[str, str]] = {
    "pvegym whatif tests/data/pve-exports/pve9-field --out": (
        "tests/experiments/test_whatif.py",
        'main(["whatif", str(FIXTURES / fixture), "--out", str(out), "--window", "day"])',
    ),
}

#: a token that stands for something the reader fills in
_PLACEHOLDER = re.compile(r"[\[\]|…<>]|\.\.\.|(^|[=,/])[A-Z][A-Z0-9_]*([.=,]|$)")


# ------------------------------------------------------------------------------ collecting commands
def _fenced_blocks(text: str) -> Iterator[tuple[str, str]]:
    """``(info string, body)`` of every fenced code block."""
    for m in re.finditer(r"^```([^\n`]*)\n(.*?)^```", text, flags=re.M | re.S):
        yield m.group(1).strip(), m.group(2)


def _shell_lines(body: str) -> Iterator[str]:
    """Logical lines of a shell block: continuations joined, comments and prompts dropped."""
    logical: list[str] = []
    for line in body.replace("\\\n", " ").splitlines():
        if line[:1].isspace() and logical:  # an indented line continues a synopsis
            logical[-1] += " " + line.strip()
        else:
            logical.append(line)
    for line in logical:
        tokens = shlex.split(line, comments=True)
        if tokens:
            yield " ".join(shlex.quote(t) for t in tokens)


def _inline_commands(text: str) -> Iterator[str]:
    """Inline code spans that are command lines (``pvegym …``, ``bash …``)."""
    without_blocks = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    for m in re.finditer(r"`([^`]+)`", without_blocks):
        span = " ".join(m.group(1).split())
        if re.match(r"(\.venv/bin/)?(pvegym|bash|python) ", span + " "):
            yield span


def _normalized(line: str) -> list[str]:
    """Tokens, with ``.venv/bin/`` dropped and ``a && b`` kept as one line (excluded as a whole)."""
    tokens = shlex.split(line)
    return [t.removeprefix(".venv/bin/") for t in tokens]


def collect() -> tuple[list[tuple[str, list[str]]], list[str]]:
    """``([(where, tokens)] of shell command lines, [python snippets])`` from README and docs/."""
    commands: dict[str, tuple[str, list[str]]] = {}
    python: list[str] = []
    for path in COMMAND_SOURCES:
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        lines: list[str] = []
        for info, body in _fenced_blocks(text):
            if info == "python":
                python.append(body)
            elif info in ("", "sh", "bash", "console"):
                lines.extend(_shell_lines(body))
            elif info not in ("toml", "text"):
                raise AssertionError(f"{where}: a ```{info} block: which kind of block is it?")
        lines.extend(_inline_commands(text))
        for line in lines:
            tokens = _normalized(line)
            commands.setdefault(" ".join(tokens), (where, tokens))
    return list(commands.values()), python


COMMANDS, PYTHON_SNIPPETS = collect()


def _excluded(tokens: list[str]) -> str | None:
    line = " ".join(tokens)
    for prefix, reason in EXCLUDED.items():
        if line.startswith(prefix) or f" {prefix}" in line or f"&& {prefix}" in line:
            return reason
    if tokens and "=" in tokens[0] and tokens[1:2] == ["ray"]:  # RAY_AUTH_TOKEN=… ray start
        return EXCLUDED["ray start"]
    return None


def _needs_arguments(name: str) -> bool:
    """``pvegym NAME`` alone is a usage error: NAME has a required argument or option."""
    parser = _subparsers().get(name)
    return parser is not None and any(a.required for a in parser._actions)


def _is_synopsis(tokens: list[str]) -> bool:
    """A line with a placeholder, or a bare ``pvegym [NAME]`` that names a command in prose."""
    if len(tokens) == 1 or (len(tokens) == 2 and _needs_arguments(tokens[1])):
        return True
    return any(_PLACEHOLDER.search(t) for t in tokens[1:])


@functools.cache
def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from pvegym.cli import build_parser

    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("pvegym has no sub-commands")


def _ids(items: list[tuple[str, list[str]]]) -> list[str]:
    return [" ".join(tokens)[:80] for _, tokens in items]


def _covered(tokens: list[str]) -> bool:
    line = " ".join(tokens)
    return any(line.startswith(prefix) for prefix in COVERED)


PVEGYM = [
    c for c in COMMANDS if c[1][:1] == ["pvegym"] and _excluded(c[1]) is None and not _covered(c[1])
]
#: ``python -m pvegym.…`` lines (the project's tools that are modules, not sub-commands)
MODULES = [c for c in COMMANDS if c[1][:2] == ["python", "-m"] and _excluded(c[1]) is None]
SYNOPSES = [c for c in PVEGYM if _is_synopsis(c[1])]
RUNNABLE = [c for c in PVEGYM if not _is_synopsis(c[1])]


def test_the_docs_have_commands() -> None:
    """The collection finds what the README shows (a parser that finds nothing passes anything)."""
    lines = {" ".join(t) for _, t in COMMANDS}
    assert "pvegym migrate --memory 24GiB --bandwidth 430MiB/s --dirty-rate 680MiB/s" in lines
    assert any(t[:2] == ["pvegym", "simulate"] for _, t in SYNOPSES)
    assert len(RUNNABLE) >= 15
    assert PYTHON_SNIPPETS


def test_every_shell_line_is_run_or_excused() -> None:
    """A shell line of the docs is a pvegym command (run or checked as a synopsis) or excluded
    with a reason: nothing is silently skipped."""
    unknown = [
        f"{where}: {' '.join(t)}"
        for where, t in COMMANDS
        if t[:1] != ["pvegym"] and t[:2] != ["python", "-m"] and _excluded(t) is None
    ]
    assert not unknown, "neither run nor in EXCLUDED:\n" + "\n".join(unknown)


def test_covered_commands_are_run_elsewhere() -> None:
    """Each command line excused as covered is one the docs show, and the named test still runs
    it."""
    lines = [" ".join(t) for _, t in COMMANDS]
    for prefix, (test_file, call) in COVERED.items():
        assert any(line.startswith(prefix) for line in lines), f"no docs line starts {prefix!r}"
        assert call in (ROOT / test_file).read_text(), f"{test_file} no longer runs {call}"


@pytest.mark.parametrize(("where", "tokens"), SYNOPSES, ids=_ids(SYNOPSES))
def test_synopsis_names_real_options(where: str, tokens: list[str]) -> None:
    """A synopsis names an existing sub-command and only options that sub-command accepts."""
    subs = _subparsers()
    if len(tokens) == 1:
        return
    name = tokens[1]
    if _PLACEHOLDER.search(name):  # pvegym COMMAND --help
        return
    if name.startswith("--"):
        assert name.strip("[]") in ("--version", "--help"), f"{where}: {name}"
        return
    names = [n for part in name.split("|") for n in [part.strip("[]")] if n]
    for n in names:
        assert n in subs, f"{where}: no sub-command {n!r} in {' '.join(tokens)}"
    accepted = {o for n in names for a in subs[n]._actions for o in a.option_strings}
    for token in tokens[2:]:
        for option in re.findall(r"--[a-z][a-z0-9-]*", token):
            assert option in accepted, f"{where}: pvegym {name} has no option {option}"


# -------------------------------------------------------------------------------- running commands
#: the metrics a tiny report shows (a comparison chart draws one panel per metric: seconds each)
TINY_METRICS = ["moves", "moves_failed"]


def _trim_scenarios(entries: list[dict[str, Any]], duration: str) -> list[dict[str, Any]]:
    """The first scenario entry, with one seed and a short episode (a family keeps its split)."""
    entry = dict(entries[0])
    seeds = entry["seeds"]
    entry["seeds"] = [seeds["start"]] if isinstance(seeds, dict) else list(seeds[:1])
    entry["duration"] = duration
    return [entry]


def _tiny_config(data: dict[str, Any]) -> dict[str, Any]:
    """An experiment, study or train file (or a manifest's config) at a tiny budget."""
    data = dict(data)
    data.pop("extends", None)
    if "algo" in data:  # a train file
        data.update(total_timesteps=64, n_envs=1, checkpoint_every=0, eval_every=0)
        data["eval_seeds"] = [1000000]
        hp = dict(data.get("hyperparams", {}))
        for key, value in {"n_steps": 32, "batch_size": 32, "learning_starts": 0}.items():
            if key in hp:
                hp[key] = value
        if "buffer_size" in hp:
            hp["buffer_size"] = 1000
        data["hyperparams"] = hp
        env = dict(data.get("env", {}))
        env["episode_seconds"] = "5m"
        env.pop("train_seeds", None)
        data["env"] = env
        return data
    report = dict(data.get("report", {}))
    report.update(bootstrap_resamples=100, timeline_seeds=0)
    if "objectives" in data:  # a study file
        data.update(n_trials=1)
        data.pop("timeout_s", None)
        data["train"] = _trim_scenarios(data["train"], "2m")
        data["test"] = _trim_scenarios(data["test"], "2m")
        report["pareto_max"] = 1
        sampler = dict(data.get("sampler", {}))
        sampler["n_startup_trials"] = 1
        data["sampler"] = sampler
    else:
        data["scenarios"] = _trim_scenarios(data["scenarios"], "2m")
        data["metrics"] = TINY_METRICS
    data["report"] = report
    return data


def _toml(value: Any) -> str:
    """A TOML rendering of plain data (``tomllib`` reads; this writes the little we need)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        raise ValueError("TOML has no null")
    return json.dumps(value)


def _write_toml(data: dict[str, Any], path: Path) -> None:
    path.write_text(
        "".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in data.items() if v is not None)
    )


def tiny(tokens: list[str], tmp: Path) -> list[str]:
    """The command line at a tiny budget, writing only under ``tmp`` (see the module docstring)."""
    argv = list(tokens[1:])
    sub = argv[0]
    for i, arg in enumerate(argv):
        path = ROOT / arg
        if arg.endswith(".toml") and arg.startswith("experiments/") and sub != "simulate":
            tiny_file = tmp / path.name
            _write_toml(_tiny_config(tomllib.loads(path.read_text())), tiny_file)
            argv[i] = str(tiny_file)
        elif arg.endswith("manifest.json"):
            manifest = json.loads(path.read_text())
            manifest["config"] = _tiny_config(manifest["config"])
            tiny_file = tmp / "manifest.json"
            tiny_file.write_text(json.dumps(manifest))
            argv[i] = str(tiny_file)
    for flag, value in (
        ("--total-timesteps", "64"),
        ("--workers", "1"),
        ("--seeds", "1"),
        ("--window", "hour"),
    ):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
    if sub == "ablate":
        argv += [] if "--seeds" in argv else ["--seeds", "1"]
        argv += [] if "--scenario" in argv else ["--scenario", "failure-loop"]
    if "--out" in argv:
        i = argv.index("--out") + 1
        (tmp / "out").mkdir(exist_ok=True)
        argv[i] = str(tmp / "out" / Path(argv[i]).name)
    elif sub in ("run", "tune", "train"):
        argv += ["--out", str(tmp / "out")]
    if sub in ("run", "tune", "train") and "--quiet" not in argv:
        argv.append("--quiet")
    if sub == "simulate" and "--duration" not in argv:
        argv += ["--duration", "10m"]
    if sub == "bench" and "--quick" not in argv:
        argv.append("--quick")
    return argv


def _costly(tokens: list[str]) -> bool:
    """Commands that take seconds even at a tiny budget (training, studies, what-if replays)."""
    return tokens[1:2] in (["train"], ["tune"], ["whatif"], ["import"], ["bench"], ["ablate"])


@pytest.mark.parametrize(
    ("where", "tokens"),
    [pytest.param(w, t, marks=[pytest.mark.slow] if _costly(t) else []) for w, t in RUNNABLE],
    ids=_ids(RUNNABLE),
)
def test_command_runs(
    where: str, tokens: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every concrete command line of the docs succeeds (exit 0) at a tiny budget."""
    from pvegym.cli import main

    monkeypatch.chdir(ROOT)
    argv = tiny(tokens, tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse and --version
        code = int(exc.code or 0)
    assert code == 0, f"{where}: pvegym {' '.join(argv)} exited {code}"


#: tiny budgets of the module tools: extra arguments
MODULE_BUDGETS = {"pvegym.learning.reward_check": ["--instances", "1"]}


@pytest.mark.slow
@pytest.mark.parametrize(("where", "tokens"), MODULES, ids=_ids(MODULES))
def test_module_command_runs(where: str, tokens: list[str], tmp_path: Path) -> None:
    """A ``python -m pvegym.…`` line names a module that exists; a concrete one runs (tiny
    budget, in a subprocess: these tools are scripts) and exits 0."""
    module = tokens[2]
    assert importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
    if _is_synopsis(tokens[2:]):
        return
    argv = [sys.executable, "-m", module, *tokens[3:], *MODULE_BUDGETS.get(module, [])]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{where}: {' '.join(argv)}: {done.stderr[-2000:]}"


@pytest.mark.parametrize("snippet", PYTHON_SNIPPETS)
def test_python_snippet_runs(snippet: str) -> None:
    """The Python examples of the docs run as written."""
    exec(compile(snippet, "<docs>", "exec"), {})


# ----------------------------------------------------------------------------- example scenarios
EXAMPLES = sorted((ROOT / "experiments" / "scenarios").glob("*.toml"))


def test_there_are_example_scenarios() -> None:
    assert len(EXAMPLES) >= 3
    listed = (DOCS / "scenarios.md").read_text()
    for path in EXAMPLES:
        assert f"experiments/scenarios/{path.name}" in listed, f"{path.name} not in scenarios.md"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_scenario_builds_and_runs(path: Path) -> None:
    """Each example file validates through the catalog and runs ten minutes under ``patched``."""
    from pvegym.policies import make_policy
    from pvegym.sim import catalog
    from pvegym.sim.simulation import Simulation

    resolved = catalog.resolve(str(path))
    scn = resolved.scenario
    assert scn.name == path.stem and scn.description
    assert scn.nodes and scn.guests
    sim = Simulation(scn, seed=0)
    result = sim.run(make_policy("patched"), duration=600.0)
    assert result["metrics"]["sim_seconds"] == 600.0


def test_reference_example_uses_every_key() -> None:
    """``reference.toml`` shows every key of the format (docs/scenarios.md says it does), the
    events of the full HA stack ``events.toml``."""
    import dataclasses

    from pvegym.sim import scenario as S

    data = tomllib.loads((ROOT / "experiments" / "scenarios" / "reference.toml").read_text())
    # the keys of the events that need the full HA stack are in events.toml (reference.toml runs
    # the model stack)
    events = tomllib.loads((ROOT / "experiments" / "scenarios" / "events.toml").read_text())
    tables: list[tuple[type, list[dict[str, Any]]]] = [
        (S.Scenario, [data]),
        (S.NodeSpec, data["nodes"]),
        (S.GuestSpec, data["guests"]),
        (S.NodeAffinitySpec, data["node_affinity"]),
        (S.ResourceAffinitySpec, data["resource_affinity"]),
        (S.EventSpec, data["events"] + events["events"]),
        (S.PsiModel, [data["psi"]]),
        (S.MigrationSettings, [data["migration"]]),
        (S.TelemetrySettings, [data["telemetry"]]),
        (S.MemorySettings, [data["memory"]]),
    ]
    for cls, items in tables:
        used = {k for item in items for k in item}
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in used]
        assert not missing, f"reference.toml lacks {cls.__name__} keys {missing}"


def test_scenario_format_documents_every_key() -> None:
    """docs/scenarios.md names every field of the scenario dataclasses and workload components as
    a key; docs/experiments.md every field of the experiment, study and train files."""
    import dataclasses

    from pvegym.experiments import config as E
    from pvegym.learning import train_config as T
    from pvegym.sim import scenario as S
    from pvegym.sim.workload import Component
    from pvegym.tuning import study_config as U

    pages = {
        "scenarios.md": (
            S.Scenario, S.NodeSpec, S.GuestSpec, S.NodeAffinitySpec, S.ResourceAffinitySpec,
            S.EventSpec, S.PsiModel, S.MigrationSettings, S.TelemetrySettings, S.MemorySettings,
            Component,
        ),
        "experiments.md": (
            E.Experiment, E.ScenarioEntry, E.PolicyEntry, E.EpisodeOptions, E.ReportOptions,
            U.StudyConfig, U.PolicySpec, U.ParamSpec, U.ObjectiveSpec, U.SamplerSpec,
            U.PrunerSpec, U.ReportSpec, T.TrainConfig, T.EnvOptions, T.ImitationOptions,
            T.SelectionOptions,
        ),
    }  # fmt: skip
    for page, classes in pages.items():
        text = (DOCS / page).read_text()
        for cls in classes:
            for f in dataclasses.fields(cls):
                # as a key: `name` in the text, or ``name =`` in an example
                assert re.search(rf"`{f.name}`|\b{f.name} *=|\[{f.name}\]", text), (
                    f"{page} does not name {cls.__name__}.{f.name}"
                )


# --------------------------------------------------------------------------------------- the links
def _tracked_text_files() -> list[Path]:
    """The project's own text files: not hidden directories (``.venv``, ``.git``), run outputs,
    caches, the committed results (:func:`test_named_documents_exist` adds their reports) or
    upstream's test data."""
    skip_dirs = {"runs", "results", "__pycache__", "node_modules"}
    skip_prefix = ("tests/data/upstream-tests",)
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel_dir = Path(dirpath).relative_to(ROOT).as_posix()
        dirnames[:] = [
            d
            for d in dirnames
            if not d.startswith(".")
            and d not in skip_dirs
            and not d.endswith(".egg-info")
            and not f"{rel_dir}/{d}".lstrip("./").startswith(skip_prefix)
        ]
        for name in filenames:
            if name.endswith((".md", ".py", ".toml", ".sh", ".txt")):
                out.append(Path(dirpath) / name)
    return sorted(out)


def _markdown_files() -> list[Path]:
    return [p for p in _tracked_text_files() if p.suffix == ".md"] + sorted(
        p for p in (ROOT / "results").rglob("*.md")
    )


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file."""
    out = set()
    for m in re.finditer(r"^#+\s+(.*)$", path.read_text(), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_markdown_links_resolve() -> None:
    """Every relative link of every markdown file points at a file that exists (and an anchor
    into a markdown file at one of its headings)."""
    broken = []
    for path in _markdown_files():
        text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part) if file_part else path
            if not dest.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


#: names of files the tools write (a report names them; they are not documents the project ships)
GENERATED = {
    "summary.md", "report.md", "ablation.md", "FILE.md", ".report.md", "pareto.md", "acceptance.md",
    "leaderboard.md",
}  # fmt: skip


def test_named_documents_exist() -> None:
    """A document named anywhere in the project — docs, code, tests, experiment files, the
    committed reports — is one the project ships (a specification cited for long and shipped
    nowhere taught us)."""
    missing = []
    for path in [*_tracked_text_files(), *(ROOT / "results").rglob("*.md")]:
        text = path.read_text(errors="replace")
        for m in re.finditer(r"[\w./*-]*[\w*-]\.md\b", text):
            name = m.group(0).lstrip("./") if not m.group(0).startswith("../") else m.group(0)
            if Path(name).name in GENERATED or "*" in name or name.startswith("http"):
                continue
            candidates = [ROOT / name, path.parent / m.group(0), DOCS / name]
            if not any(c.exists() for c in candidates):
                missing.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not missing, "documents named but not shipped:\n" + "\n".join(sorted(set(missing)))


# ---------------------------------------------------------------------------------- metric table
def metric_table() -> str:
    """The metric table of docs/metrics.md, from the registry."""
    from pvegym.sim.metrics import metric_specs

    rows = [
        "| metric | unit | better | adds up round by round | what it measures |",
        "|---|---|---|---|---|",
    ]
    for s in metric_specs():
        additive = "yes" if s.additive else "no"
        rows.append(f"| `{s.name}` | {s.unit} | {s.better or '—'} | {additive} | {s.description} |")
    return "\n".join(rows)


def _with_table(text: str, table: str) -> str:
    head, rest = text.split(TABLE_BEGIN, 1)
    _, tail = rest.split(TABLE_END, 1)
    return f"{head}{TABLE_BEGIN}\n{table}\n{TABLE_END}{tail}"


def test_metric_table_is_the_registry() -> None:
    """docs/metrics.md lists exactly the registry's metrics, units, directions and descriptions."""
    text = METRICS_MD.read_text()
    assert TABLE_BEGIN in text and TABLE_END in text
    assert text == _with_table(text, metric_table()), (
        "docs/metrics.md disagrees with pvegym.sim.metrics.metric_specs(): "
        "run `python tests/test_docs.py --write`"
    )


def test_metric_table_check_can_fail() -> None:
    """The comparison sees a changed registry (a check that cannot fail proves nothing)."""
    text = METRICS_MD.read_text()
    assert _with_table(text, metric_table().replace("| s |", "| min |", 1)) != text


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_docs.py --write  (rewrites docs/metrics.md's table)")
    sys.path.insert(0, str(ROOT))
    METRICS_MD.write_text(_with_table(METRICS_MD.read_text(), metric_table()))
