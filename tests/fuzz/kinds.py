"""The input kinds the fuzz suite mutates, each as a Hypothesis strategy of :class:`Case`.

A case is the files to write into a fresh directory, the ``pvegym`` command line to run there, and
what a successful run must have produced. Every kind starts from valid inputs (pvegym's own named
scenarios, small experiment / study / train files, records and model files it wrote, upstream's
test directories, the bundled traces) and mutates them (:mod:`mutate`). Bases are small (a few
simulated minutes) so that a valid case runs in well under a second.
"""

from __future__ import annotations

import base64
import copy
import json
import math
import pickle
import shutil
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from mutate import (
    NUMBERS,
    SHAPES,
    STRINGS,
    byte_mutation,
    chance,
    dotted,
    leaves,
    mutated,
    to_json,
    to_toml,
    toml_value,
)

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "data" / "upstream-tests"
TRACES = ROOT / "pvegym" / "data" / "traces"
PLANETLAB = "20110303_146-179_surfsnel_dsl_internl_net_root"

Check = Callable[[Path, str], "str | None"]
Special = Callable[[Path], None]


@dataclass
class Case:
    """One fuzz case: files (relative path → bytes), special files made by ``special``, the
    command line, which fork server runs it, which codes are a valid run, and its output check."""

    kind: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    special: list[Special] = field(default_factory=list)
    torch: bool = False
    ok_codes: tuple[int, ...] = (0,)
    outputs: tuple[str, ...] = ()  # where new files may appear (relative prefixes)
    check: Check | None = None
    log: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ checks
def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} in JSON output")


def strict_json(text: str) -> Any:
    """JSON as other tools read it: ``NaN``/``Infinity`` are not JSON."""
    return json.loads(text, parse_constant=_reject_constant)


def check_simulate_json(case_dir: Path, stdout: str) -> str | None:
    try:
        doc = strict_json(stdout)
    except ValueError as err:
        return f"stdout is not strict JSON: {err}"
    if not isinstance(doc, dict) or not isinstance(doc.get("metrics"), dict):
        return "no metrics in the simulate document"
    for k, v in doc["metrics"].items():
        if v is not None and not (isinstance(v, int | float) and math.isfinite(v)):
            return f"metric {k} = {v!r}"
    return None


def check_json(case_dir: Path, stdout: str) -> str | None:
    try:
        strict_json(stdout)
    except ValueError as err:
        return f"stdout is not strict JSON: {err}"
    return None


def check_nonempty(case_dir: Path, stdout: str) -> str | None:
    return None if stdout.strip() else "no output"


def check_files(*names: str, json_files: tuple[str, ...] = ()) -> Check:
    def check(case_dir: Path, stdout: str) -> str | None:
        for n in names:
            if not (case_dir / n).is_file():
                return f"{n} was not written"
        for n in json_files:
            try:
                strict_json((case_dir / n).read_text())
            except ValueError as err:
                return f"{n} is not strict JSON: {err}"
        return None

    return check


def check_study(storage: str, exact_budget: bool = True) -> Check:
    """A finished ``tune``: every trial COMPLETE, PRUNED or still WAITING (a FAIL is a crash the
    file let through), none RUNNING, and the study's budget reached exactly."""

    def check(case_dir: Path, stdout: str) -> str | None:
        import optuna
        from optuna.trial import TrialState

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        url = (
            storage
            if "////" in storage
            else storage.replace("sqlite:///", f"sqlite:///{case_dir}/")
        )
        summaries = optuna.get_all_study_summaries(url)
        if not summaries:
            return "no study in the storage"
        study = optuna.load_study(study_name=summaries[0].study_name, storage=url)
        trials = study.get_trials(deepcopy=False)
        finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        # a trial that found the budget taken by another worker ends FAIL without running; an
        # enqueued trial (the defaults) still WAITING is work left, not a failure (--n-trials 0)
        bad = [
            t.number
            for t in trials
            if t.state not in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.WAITING)
            and not t.user_attrs.get("over_budget")
        ]
        if bad:
            states = sorted({t.state.name for t in trials if t.number in bad})
            err = next((t.user_attrs.get("error") for t in trials if t.number in bad), "")
            return f"trials {bad} ended {states}: {str(err)[:120]}"
        budget = study.user_attrs.get("config", {}).get("n_trials")
        if exact_budget and budget is not None and len(finished) != budget:
            return f"{len(finished)} finished trials, budget {budget}"
        return None

    return check


# ------------------------------------------------------------------------------------------ bases
def _short(data: dict[str, Any], duration: str = "4m") -> dict[str, Any]:
    data = copy.deepcopy(data)
    data["duration"] = duration
    return data


def scenario_bases() -> list[dict[str, Any]]:
    from pvegym.sim import families
    from pvegym.sim.scenarios import scenario_data

    names = (
        "failure-loop",
        "dominant-oscillation",
        "pressure-evacuation",
        "nonconverging-migration",
        "contended-3node",
    )
    bases = [_short(scenario_data(n)) for n in names]
    small = families.family_data("small", 1_000_003)
    bases.append(_short(small))
    return [json.loads(json.dumps(b)) for b in bases]  # plain lists and floats, as TOML gives


POLICIES = ("noop", "upstream", "patched", "guest-centric")

EXPERIMENT: dict[str, Any] = {
    "name": "fz",
    "description": "fuzz base",
    "metrics": ["moves", "guest_stall_s", "oscillations", "evacuation_latency_s"],
    "episode": {"duration": "3m"},
    "report": {"bootstrap_resamples": 200, "bootstrap_seed": 0, "timeline_seeds": 0},
    "scenarios": [
        {"name": "failure-loop", "seeds": [0, 1]},
        {
            "name": "dominant-oscillation",
            "seeds": {"start": 0, "count": 1},
            "qemu_server": "patched",
            "set": {"migration.bandwidth": "1GiB/s"},
            "label": "dom-1g",
        },
    ],
    "policies": [
        {"name": "noop"},
        {"name": "patched", "label": "patched-mi", "params": {"min_improvement": 0.05}},
    ],
}
EXPERIMENT_FAMILY: dict[str, Any] = {
    "name": "fzf",
    "metrics": ["moves", "stall_cpu_s"],
    "report": {"bootstrap_resamples": 100, "timeline_seeds": 1},
    "scenarios": [{"name": "small", "seeds": [1_000_000], "duration": "2m"}],
    "policies": [{"name": "upstream", "params": {"threshold": 0.4}}],
}

STUDY: dict[str, Any] = {
    "name": "fzs",
    "n_trials": 2,
    "enqueue_defaults": True,
    "policy": {"name": "patched"},
    "params": {
        "min_improvement": {"low": 0.0, "high": 0.3},
        "hold_duration": {"low": 1, "high": 5, "int": True},
    },
    "train": [{"name": "failure-loop", "seeds": [0], "duration": "2m"}],
    "test": [{"name": "failure-loop", "seeds": [100], "duration": "2m"}],
    "objectives": [{"name": "cost", "weights": {"guest_stall_s": 1.0, "moves": 60.0}}],
    "sampler": {"n_startup_trials": 1, "seed": 0},
    "report": {"bootstrap_resamples": 100, "pareto_max": 1},
}


def _train(algo: str, hyper: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": f"fzt-{algo.lower()}",
        "algo": algo,
        "total_timesteps": 64,
        "n_envs": 1,
        "eval_seeds": [1_000_000],
        "seed": 0,
        "hyperparams": {**hyper, "policy_kwargs": {"net_arch": [16]}},
        "env": {"scenario": "small", "episode_seconds": "2m", "train_seeds": [0, 1]},
    }


TRAINS = [
    _train("PPO", {"n_steps": 32, "batch_size": 16, "n_epochs": 1, "learning_rate": 3e-4}),
    _train("MaskablePPO", {"n_steps": 32, "batch_size": 16, "n_epochs": 1, "gamma": 0.99}),
    _train("A2C", {"n_steps": 8, "learning_rate": 7e-4}),
    _train(
        "DQN",
        {
            "buffer_size": 500,
            "learning_starts": 16,
            "batch_size": 16,
            "train_freq": 4,
            "target_update_interval": 32,
        },
    ),
]


# ------------------------------------------------------------------------------------------ kinds
def _doc_and_bytes(
    draw: Any, base: Any, writer: Callable[[Any], str]
) -> tuple[Any, bytes, list[str]]:
    doc, log = draw(mutated(base))
    blob = writer(doc).encode("utf-8", "surrogatepass")
    blob, note = draw(byte_mutation(blob))
    return doc, blob, log + ([note] if note else [])


@st.composite
def scenario_case(draw: Any, bases: list[dict[str, Any]]) -> Case:
    _doc, blob, log = _doc_and_bytes(draw, draw(st.sampled_from(bases)), to_toml)
    argv = ["simulate", "--scenario", "in/scenario.toml", "--json"]
    argv += ["--policy", draw(st.sampled_from(POLICIES))]
    return Case("scenario", argv, {"in/scenario.toml": blob}, check=check_simulate_json, log=log)


def _set_text(draw: Any, value: Any) -> str:
    if isinstance(value, str) and draw(st.booleans()):
        return value  # bare: taken as a string (24GiB) unless it parses as TOML
    return toml_value(value)


@st.composite
def set_case(draw: Any, bases: dict[str, dict[str, Any]]) -> Case:
    name = draw(st.sampled_from(sorted(bases)))
    base = bases[name]
    paths = [p for p, _ in leaves(base)]
    sets: list[str] = []
    touches_duration = False
    for _ in range(draw(st.integers(1, 3))):
        path, value = draw(st.sampled_from([(p, v) for p, v in leaves(base)]))
        key = dotted(path)
        touches_duration |= key == "duration"
        gentle = not chance(draw, 0.5)
        if gentle:
            doc, _ = draw(mutated({"v": value}, gentle_share=1.0, max_ops=1))
            text = _set_text(draw, doc.get("v", value))
        else:
            text = _set_text(draw, draw(st.sampled_from(NUMBERS + STRINGS + SHAPES)))
        shape = draw(st.sampled_from(("ok",) * 8 + ("no-eq", "bad-key", "far-index")))
        if shape == "no-eq":
            sets.append(key)
        elif shape == "bad-key":
            sets.append(f"{key}..x[=1={text}")
        elif shape == "far-index":
            sets.append(f"nodes[{len(paths)}].maxcpu={text}")
        else:
            sets.append(f"{key}={text}")
    argv = ["simulate", "--scenario", name, "--json"]
    if not touches_duration or draw(st.booleans()):
        argv += ["--duration", "4m"]
    for s in sets:
        argv += ["--set", s]
    return Case("set", argv, check=check_simulate_json, log=sets)


@st.composite
def experiment_case(draw: Any) -> Case:
    base = copy.deepcopy(draw(st.sampled_from([EXPERIMENT, EXPERIMENT_FAMILY])))
    log: list[str] = []
    if chance(draw, 0.2):  # labels become directories of the run's output
        label = draw(st.sampled_from(LABELS))
        for key in ("scenarios", "policies"):
            base[key][draw(st.integers(0, len(base[key]) - 1))]["label"] = label
        log.append(f"a scenario's and a policy's label = {label!r:.40}")
    _doc, blob, mlog = _doc_and_bytes(draw, base, to_toml)
    argv = ["run", "in/exp.toml", "--out", "out", "--quiet"]
    if chance(draw, 0.15):
        argv += ["--workers", "2"]
    check = check_files("out/summary.md", "out/metrics.csv", json_files=("out/manifest.json",))
    return Case(
        "experiment", argv, {"in/exp.toml": blob}, outputs=RUN_OUTPUTS, check=check, log=log + mlog
    )


#: labels a careless or hostile experiment file may give
LABELS = (
    "..",
    "..",
    "../..",
    "../../x",
    "/tmp/x",
    "a/b",
    ".",
    ".hidden",
    "x" * 300,
    "ok\x00",
    "a b",
)
#: what ``run --out out`` writes: nothing else, nowhere else
RUN_OUTPUTS = (
    "out/cells/",
    "out/records/",
    "out/plots/",
    "out/summary.md",
    "out/metrics.csv",
    "out/manifest.json",
    "out/run.json",
)


@st.composite
def study_case(draw: Any) -> Case:
    _doc, blob, log = _doc_and_bytes(draw, STUDY, to_toml)
    storage = "sqlite:///out/study.db"
    argv = ["tune", "in/study.toml", "--storage", storage, "--quiet"]
    if not chance(draw, 0.25):  # the held-out report (plots, re-evaluation) is the dear part
        argv.append("--no-report")
    return Case(
        "study",
        argv,
        {"in/study.toml": blob},
        outputs=("out/", "runs/"),
        check=check_study(storage),
        log=log,
    )


@st.composite
def train_case(draw: Any) -> Case:
    _doc, blob, log = _doc_and_bytes(draw, draw(st.sampled_from(TRAINS)), to_toml)
    argv = ["train", "in/train.toml", "--out", "out", "--quiet"]
    check = check_files("out/model.zip", json_files=("out/manifest.json", "out/config.json"))
    return Case(
        "train", argv, {"in/train.toml": blob}, torch=True, outputs=("out/",), check=check, log=log
    )


def _replay_check(case_dir: Path, stdout: str) -> str | None:
    return None if stdout.startswith(("metrics match", "metrics differ")) else "no verdict"


@st.composite
def record_case(draw: Any, records: list[dict[str, Any]]) -> Case:
    _doc, blob, log = _doc_and_bytes(draw, draw(st.sampled_from(records)), to_json)
    return Case(
        "record",
        ["replay", "in/record.json"],
        {"in/record.json": blob},
        ok_codes=(0, 1),
        check=_replay_check,
        log=log,
    )


def _trace_files() -> dict[str, str]:
    pl = (TRACES / "planetlab" / PLANETLAB).read_text().splitlines()[:60]
    rows = [f"{1000 + 37 * i % 900},{400000 + 9000 * (i % 17)}" for i in range(60)]
    bb = [
        "# id=7 interval_s=300 cpu_count=4 cpu_capacity_mhz=10400 mem_capacity_kb=1048576",
        "cpu_mhz,mem_kb",
        *rows,
    ]
    return {"planetlab/mine": "\n".join(pl) + "\n", "bitbrains/7.csv": "\n".join(bb) + "\n"}


TRACE_SCENARIO: dict[str, Any] = {
    "name": "traced",
    "duration": "4m",
    "nodes": [
        {"name": "node1", "maxcpu": 16, "maxmem": "64GiB"},
        {"name": "node2", "maxcpu": 16, "maxmem": "64GiB"},
    ],
    "guests": [
        {
            "sid": "vm:101",
            "node": "node1",
            "maxcpu": 4,
            "maxmem": "8GiB",
            "cpu": {"type": "trace", "source": "planetlab/mine", "trace_dir": "traces", "scale": 4},
            "memhost": [
                {"type": "constant", "level": "2GiB"},
                {
                    "type": "trace",
                    "source": "bitbrains/7",
                    "trace_dir": "traces",
                    "field": "mem",
                    "scale": "4GiB",
                    "offset": "1h",
                },
            ],
        },
        {
            "sid": "vm:102",
            "node": "node1",
            "maxcpu": 4,
            "maxmem": "8GiB",
            "cpu": {"type": "trace", "source": f"planetlab/{PLANETLAB}", "loop": False},
            "memhost": "3GiB",
        },
        {
            "sid": "vm:201",
            "node": "node2",
            "maxcpu": 4,
            "maxmem": "8GiB",
            "cpu": {"type": "trace", "source": "bitbrains/7", "trace_dir": "traces"},
            "memhost": "2GiB",
        },
    ],
}


def _mutate_lines(draw: Any, text: str) -> tuple[str, str]:
    lines = text.splitlines()
    op = draw(st.sampled_from(("keep",) * 8 + ("line", "drop", "dup", "meta")))
    if op == "keep" or not lines:
        return text, ""
    i = draw(st.integers(0, len(lines) - 1))
    if op == "line":
        lines[i] = str(draw(st.sampled_from(NUMBERS + STRINGS)))
    elif op == "drop":
        del lines[i:]
    elif op == "dup":
        lines[i:i] = [lines[i]] * draw(st.sampled_from((1, 100, 20_000)))
    else:
        lines[0] = draw(
            st.sampled_from(
                (
                    "# id=7 interval_s=0 cpu_count=4 cpu_capacity_mhz=1 mem_capacity_kb=1",
                    "# id=7 interval_s=nan cpu_count=4 cpu_capacity_mhz=1 mem_capacity_kb=1",
                    "# id=7 interval_s=1e-300 cpu_count=4 cpu_capacity_mhz=1 mem_capacity_kb=1",
                    "# interval_s=300 cpu_count=1e308 cpu_capacity_mhz=inf mem_capacity_kb=1",
                    "# garbage",
                    "",
                )
            )
        )
    return "\n".join(lines) + "\n", f"{op} line {i}"


def _special_file(rel: str, what: str) -> Special:
    def make(case_dir: Path) -> None:
        import os

        p = case_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        elif p.exists() or p.is_symlink():
            p.unlink()
        if what == "fifo":
            os.mkfifo(p)
        elif what == "dir":
            p.mkdir()
        else:
            p.symlink_to(what)

    return make


@st.composite
def trace_case(draw: Any) -> Case:
    _doc, blob, log = _doc_and_bytes(draw, TRACE_SCENARIO, to_toml)
    files = {"scenario.toml": blob}
    special: list[Special] = []
    for rel, text in _trace_files().items():
        new, note = _mutate_lines(draw, text)
        data, bnote = draw(byte_mutation(new.encode()))
        files[f"traces/{rel}"] = data
        log += [f"{rel}: {n}" for n in (note, bnote) if n]
    if chance(draw, 0.15):
        rel = draw(st.sampled_from(sorted(_trace_files())))
        what = draw(st.sampled_from(("fifo", "dir", "/dev/zero", "/etc/passwd", "../../x")))
        special.append(_special_file(f"traces/{rel}", what))
        log.append(f"{rel} -> {what}")
    if chance(draw, 0.15):  # a source or trace_dir that points elsewhere
        doc = tomllib.loads(blob.decode("utf-8", "replace")) if not log else None
        if doc is not None:
            comp = doc["guests"][0]["cpu"]
            key = draw(st.sampled_from(("source", "trace_dir")))
            comp[key] = draw(st.sampled_from(ESCAPES[key]))
            files["scenario.toml"] = to_toml(doc).encode()
            log.append(f"guests[0].cpu.{key} = {comp[key]!r}")
    argv = ["simulate", "--scenario", "scenario.toml", "--json"]
    return Case("trace", argv, files, special, check=check_simulate_json, log=log)


#: sources and trace directories that lead out of the trace directory (``../canary`` is a file the
#: fuzz root holds beside every case directory: its content must never show in an output)
ESCAPES = {
    "source": (
        "planetlab/../../../canary",
        "planetlab/../../../../../../../etc/passwd",
        "planetlab/../../../../../../../dev/zero",
        "bitbrains/../../../canary",
        "planetlab//etc/passwd",
    ),
    "trace_dir": ("..", "/etc", "/dev", "../..", "/", "traces/../.."),
}


UPSTREAM_DIRS = (
    "test-crs-dynamic-auto-rebalance0",
    "test-crs-dynamic-auto-rebalance-topsis1",
    "test-crs-static-auto-rebalance1",
    "test-crs-dynamic-constrained-auto-rebalance1",
)


@st.composite
def upstream_case(draw: Any) -> Case:
    src = UPSTREAM / draw(st.sampled_from(UPSTREAM_DIRS))
    files = {f"in/t/{p.name}": p.read_bytes() for p in sorted(src.iterdir()) if p.is_file()}
    names = sorted(files)
    log: list[str] = []
    special: list[Special] = []
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from(names))
        op = draw(st.sampled_from(("doc", "doc", "doc", "lines", "bytes", "delete", "special")))
        blob = files.get(name, b"")
        if op == "doc":
            try:
                base = json.loads(blob)
            except ValueError:
                op = "lines"
            else:
                doc, mlog = draw(mutated(base))
                files[name] = to_json(doc).encode()
                log += [f"{name}: {m}" for m in mlog]
        if op == "lines":
            new, note = _mutate_lines(draw, blob.decode("utf-8", "replace"))
            files[name] = new.encode()
            log.append(f"{name}: {note}")
        elif op == "bytes":
            files[name], note = draw(byte_mutation(blob, share=1.0))
            log.append(f"{name}: {note}")
        elif op == "delete":
            files.pop(name, None)
            log.append(f"{name}: deleted")
        elif op == "special":
            what = draw(st.sampled_from(("fifo", "dir", "/dev/zero", "/etc/passwd")))
            files.pop(name, None)
            special.append(_special_file(name, what))
            log.append(f"{name} -> {what}")
    if chance(draw, 0.05):
        files["in/t/unknown-file"] = b"x"
        log.append("unknown file")
    argv = ["replay-upstream", "in/t", "--json"]
    return Case("upstream", argv, files, special, check=check_json, log=log)


class _Exec:
    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, (self.code,))


def _agent_files(name: str) -> dict[str, bytes]:
    run = ROOT / "results" / name
    return {
        "model.zip": (run / "model.zip").read_bytes(),
        "config.json": (run / "config.json").read_bytes(),
    }


def _rezip(
    blob: bytes, edit: Callable[[str, bytes], bytes | None], extra: dict[str, bytes]
) -> bytes:
    import io

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            new = edit(info.filename, zin.read(info))
            if new is not None:
                zout.writestr(info.filename, new)
        for k, v in extra.items():
            zout.writestr(k, v)
    return out.getvalue()


@st.composite
def model_case(draw: Any, agents: dict[str, dict[str, bytes]]) -> Case:
    name = draw(st.sampled_from(sorted(agents)))
    files = dict(agents[name])
    log: list[str] = [name]
    op = draw(
        st.sampled_from(("none", "config", "config", "data", "data", "entry", "pickle", "bytes"))
    )
    if op == "config":
        doc, blob, mlog = _doc_and_bytes(draw, json.loads(files["config.json"]), to_json)
        files["config.json"] = blob
        log += mlog
    elif op == "data":
        base = json.loads(
            zipfile.ZipFile(__import__("io").BytesIO(files["model.zip"])).read("data")
        )
        plain = {k: v for k, v in base.items() if not (isinstance(v, dict) and ":serialized:" in v)}
        doc, mlog = draw(mutated(plain))
        base.update(doc)
        for k in set(plain) - set(doc):
            base.pop(k, None)
        files["model.zip"] = _rezip(
            files["model.zip"], lambda n, b: to_json(base).encode() if n == "data" else b, {}
        )
        log += mlog
    elif op == "entry":
        entry = draw(
            st.sampled_from(("policy.pth", "policy.optimizer.pth", "data", "system_info.txt"))
        )
        how = draw(st.sampled_from(("drop", "bytes", "extra")))
        if how == "drop":
            files["model.zip"] = _rezip(
                files["model.zip"], lambda n, b: None if n == entry else b, {}
            )
        elif how == "bytes":
            files["model.zip"] = _rezip(
                files["model.zip"],
                lambda n, b: draw(byte_mutation(b, share=1.0))[0] if n == entry else b,
                {},
            )
        else:
            files["model.zip"] = _rezip(files["model.zip"], lambda n, b: b, {"extra.pth": b"x"})
        log.append(f"{entry}: {how}")
    elif op == "pickle":
        key = draw(st.sampled_from(("observation_space", "policy_class", "lr_schedule", "new_key")))
        target = draw(st.sampled_from(("exec", "system")))
        code = "open('pwned', 'w').write('pwned')"
        payload = (
            pickle.dumps(_Exec(code))
            if target == "exec"
            else pickle.dumps(
                type(
                    "P",
                    (),
                    {"__reduce__": lambda self: (__import__("os").system, ("touch pwned",))},
                )()
            )
        )

        def edit(n: str, b: bytes) -> bytes:
            if n != "data":
                return b
            data = json.loads(b)
            data[key] = {":serialized:": base64.b64encode(payload).decode()}
            return json.dumps(data).encode()

        files["model.zip"] = _rezip(files["model.zip"], edit, {})
        log.append(f"pickle {target} in {key}")
    elif op == "bytes":
        files["model.zip"], note = draw(byte_mutation(files["model.zip"], share=1.0))
        log.append(f"model.zip: {note}")
    argv = [
        "simulate",
        "--scenario",
        "failure-loop",
        "--duration",
        "2m",
        "--json",
        "--policy",
        "learned",
        "--param",
        "model=in/agent",
    ]
    if chance(draw, 0.2):
        argv += ["--param", "deterministic=false"]
    return Case(
        "model",
        argv,
        {f"in/agent/{k}": v for k, v in files.items()},
        torch=True,
        check=check_simulate_json,
        log=log,
    )


STORAGE_STUDY = {
    **STUDY,
    "name": "fzst",
    "n_trials": 1,
    "train": [{"name": "failure-loop", "seeds": [0], "duration": "1m"}],
}


@st.composite
def storage_case(draw: Any, valid_db: bytes) -> Case:
    url = draw(
        st.sampled_from(
            (
                # valid storages (7 of 23, so that well over a quarter of the cases run)
                "sqlite:///out/study.db",
                "sqlite:///out/study.db",
                "sqlite:///out/study.db",
                "sqlite:///in/valid.db",
                "sqlite:///in/valid.db",
                "sqlite:///in/valid.db",
                "sqlite:///new/dir/x.db",
                "sqlite:////etc/passwd",
                "sqlite:///in/garbage.db",
                "sqlite:///in/truncated.db",
                "sqlite:///in/other.db",
                "sqlite:///in",
                "sqlite:///:memory:",
                "sqlite:///out/\x00.db",
                "sqlite:///" + "a" * 300 + ".db",
                "sqlite://",
                "sqlite:////dev/zero",
                "postgresql+psycopg://u:p@127.0.0.1:9/db",
                "postgresql://u@[::1]:99999/db",
                "mysql://u:p@localhost/db",
                "foo://bar",
                "",
                "not a url",
            )
        )
    )
    files = {
        "in/study.toml": to_toml(STORAGE_STUDY).encode(),
        "in/valid.db": valid_db,
        "in/garbage.db": bytes(range(256)) * 64,
        "in/truncated.db": valid_db[: len(valid_db) // 3],
    }
    special: list[Special] = []
    if url.endswith("other.db"):
        other = copy.deepcopy(STORAGE_STUDY)
        files["in/study.toml"] = to_toml(
            {**other, "params": {"dead_band": {"low": 0, "high": 0.1}}}
        ).encode()
        files["in/other.db"] = valid_db
    argv = ["tune", "in/study.toml", "--storage", url, "--quiet", "--no-report"]
    n_more = draw(st.sampled_from((None, None, "0", "1", "2")))
    if n_more is not None:
        argv += ["--n-trials", n_more]
    if chance(draw, 0.2):
        argv += ["--workers", "2"]
    sqlite = url.startswith("sqlite:///") and ":memory:" not in url
    check = check_study(url, exact_budget=n_more is None) if sqlite else None
    return Case(
        "storage",
        argv,
        files,
        special,
        outputs=("out/", "in/", "new/", "runs/"),
        check=check,
        log=[repr(url)[:80]],
    )


# ------------------------------------------------------------------------------------------ cli
_FLAG_VALUES: dict[str, tuple[tuple[str, ...], tuple[Any, ...]]] = {
    # flag: (good values, bad values)
    "--seed": (("0", "3", "17"), ("-1", "1e3", "abc", str(2**64), "4294967296", "")),
    "--duration": (
        ("3m", "120", "2m", "90s"),
        ("5", "5 minutes", "1e12s", "inf", "nan", "-1m", "0", "1e300"),
    ),
    "--policy": (POLICIES, ("nope", "learned", "")),
    "--qemu-server": (("patched", "unpatched"), ("both",)),
    "--memory": (("24GiB", "4GiB"), ("1e30", "inf", "-1", "abc", "0", "1e30GiB")),
    "--bandwidth": (("430MiB/s", "1GiB/s"), ("0", "inf", "430MiB", "-1MiB/s", "1e300GiB/s")),
    "--dirty-rate": (("680MiB/s", "10MiB/s"), ("nan", "1e30GiB/s", "x")),
    "--wws": (("2GiB",), ("1e30", "-1")),
    "--throttle-sensitivity": (("0.5", "1"), ("2", "-1", "nan", "inf")),
    "--downtime-limit": (("100ms", "300ms"), ("0", "inf", "-1ms", "1e300")),
    "--boost-factor": (("1.5",), ("0", "nan", "1e308")),
    "--abort-factor": (("4",), ("0", "-1", "inf")),
    "--workers": (("1", "2"), ("0", "-1", "1000000", "x")),
    "--n-trials": (("1", "0"), ("-1", "1000000000000", "x")),
    "--worker-id": (("0", "3"), ("-1", "x")),
}
_CLI_COMMANDS = {
    "simulate": ("--seed", "--duration", "--policy", "--qemu-server"),
    "migrate": (
        "--memory",
        "--bandwidth",
        "--dirty-rate",
        "--wws",
        "--throttle-sensitivity",
        "--downtime-limit",
        "--qemu-server",
        "--duration",
        "--boost-factor",
        "--abort-factor",
    ),
    "tune": ("--n-trials", "--workers", "--worker-id"),
    "run": ("--workers",),
    "replay": (),
    "replay-upstream": (),
    "scenarios": (),
    "policies": (),
    "ablate": (),
    "benchmark": (),
}
#: pvegym benchmark's SPECs: cheap valid ones, and refusals of every form
_BENCH_SPECS = (("noop", "upstream", "pvegym.policies.noop:NoopPolicy"), (
    "nope", "noop,x=1", "patched,threshold=x", "patched,=1", "patched-tuned,margin=0",
    "no_such_module:make", "os:getcwd", "os:system", "pvegym.sim.tasks:TASKS", ":", "os:",
    "learned:", "learned:in/x.json", "learned:/dev/zero", "learned:in", "\x00", "noop,a=b=c",
))  # fmt: skip
_PATHS = (
    "in/x.toml",
    "in/missing.toml",
    "in",
    "/dev/zero",
    "/etc/passwd",
    "in/\x00.toml",
    "a" * 300 + ".toml",
    "in/bad-utf8.toml",
    "in/x.json",
    "",
)


@st.composite
def cli_case(draw: Any) -> Case:
    cmd = draw(st.sampled_from(sorted(_CLI_COMMANDS)))
    good = not chance(draw, 0.5)
    argv = [cmd]
    files: dict[str, bytes] = {"in/bad-utf8.toml": b'name = "\xff\xfe"\n', "in/x.json": b"{}"}
    outputs: tuple[str, ...] = ()
    check: Check | None = check_nonempty
    if cmd == "simulate":
        argv += [
            "--scenario",
            draw(st.sampled_from(("failure-loop", "small", "idle-night")))
            if good
            else draw(st.sampled_from((*_PATHS, "nope"))),
        ]
        if "--duration" not in argv:
            argv += ["--duration", "3m"]
    elif cmd == "migrate":
        argv += ["--memory", "8GiB", "--bandwidth", "1GiB/s", "--dirty-rate", "100MiB/s"]
    elif cmd == "tune":
        files["in/study.toml"] = to_toml(STORAGE_STUDY).encode()
        argv += [
            "in/study.toml" if good else draw(st.sampled_from(_PATHS)),
            "--storage",
            "sqlite:///out/s.db",
            "--quiet",
            "--no-report",
        ]
        outputs = ("out/", "runs/")  # the run directory runs/<study>/ (pvegym-run.json)
        check = check_study("sqlite:///out/s.db")
    elif cmd == "run":
        files["in/exp.toml"] = to_toml(EXPERIMENT_FAMILY).encode()
        out = (
            "out"
            if good
            else draw(st.sampled_from(("out", "..", "/", "out/\x00", "a" * 300, "in/exp.toml")))
        )
        argv += ["in/exp.toml" if good else draw(st.sampled_from(_PATHS)), "--out", out, "--quiet"]
        outputs = ("out/",)
    elif cmd in ("replay", "replay-upstream"):
        argv += [draw(st.sampled_from((*_PATHS, "in/x.json")))]
    elif cmd == "benchmark":  # a valid case scores one cheap policy on small's 50 instances
        ok_specs, bad_specs = _BENCH_SPECS
        argv += [
            "small" if good else draw(st.sampled_from(("small", "medium", "nope", "failures", ""))),
            "--policy",
            draw(st.sampled_from(ok_specs if good else bad_specs + ok_specs)),
            "--out",
            "out" if good else draw(st.sampled_from(("out", "out/\x00", "a" * 300, "in/x.json"))),
            "--quiet",
        ]
        outputs = ("out/",)
        if not good and argv[1] != "small":  # other tasks' valid runs take minutes
            argv[3] = "nope"
    elif cmd == "ablate":  # a valid ablation runs minutes: only its refusals are fuzzed
        argv += ["--seeds", draw(st.sampled_from(("0", "-1", "1e9", "x", "100000000000")))]
        check = None
    for flag in _CLI_COMMANDS[cmd]:
        if chance(draw, 0.5):
            ok, bad = _FLAG_VALUES[flag]
            value = draw(st.sampled_from(ok if good else bad + ok))
            if flag in argv:
                argv[argv.index(flag) + 1] = str(value)
            else:
                argv += [flag, str(value)]
    if cmd == "tune" and "--n-trials" in argv:
        # N more trials, not the study's budget: with 0 the enqueued defaults trial stays WAITING
        check = check_study("sqlite:///out/s.db", exact_budget=False)
    if cmd == "simulate" and draw(st.booleans()):
        argv.append("--json")
        check = check_simulate_json
    if cmd == "migrate" and draw(st.booleans()):
        argv.append("--json")
        check = check_json
    if chance(draw, 0.05):
        argv.append(draw(st.sampled_from(("--bogus", "--json=1", "-h=2", "\x00"))))
    torch = "learned" in argv
    return Case(
        "cli",
        argv,
        files,
        torch=torch,
        outputs=outputs,
        check=check,
        ok_codes=(0, 1) if cmd == "replay" else (0,),
        log=[" ".join(argv)[:200]],
    )
