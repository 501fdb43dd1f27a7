"""The fuzz suite's machinery: fork servers, running and judging one case, per-kind tallies.

A case *passes* when it ends in one of two ways:

* **ran**: exit 0 (``replay``: 0 or 1) and its output check holds (strict JSON, the files a run
  writes, a study with exactly its budget of COMPLETE/PRUNED trials), and no file appeared
  outside the places the command writes to;
* **refused**: exit 2 with exactly one line on stderr of at most :data:`MAX_MESSAGE` characters.

A case killed at the CPU limit is run once more from fresh files and judged on that run (the
table counts the reruns): the first child to need a numba kernel specialization compiles it,
which on a cold cache can take the whole budget; a real hang hangs again. A case killed at the
wall-clock limit while it was computing (more than :data:`STARVED_CPU_S` of
CPU) was *starved* by other processes on a shared machine: counted, printed, not judged.

Anything else is a failure, by signature: a traceback (exception and the deepest pvegym frame), a
hang (killed after :data:`TIMEOUT_S`), a memory overrun (``MemoryError`` under the
:data:`MEMORY_BYTES` address-space budget, or that much resident growth), a multi-line or
over-long error, a bad exit code, a bad output, a stray file, or code from a model file executed.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import os
import queue
import re
import shutil
import sys
import tempfile
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 10.0  # CPU seconds of a case (RLIMIT_CPU)
WALL_S = 60.0  # wall seconds of a case that blocks without computing
STARVED_CPU_S = 2.0  # a case killed at WALL_S that computed more than this was starved, not blocked
MEMORY_BYTES = 1 << 30
MAX_MESSAGE = 400  # characters of a one-line error
KEEP_FAILURES = 3  # case directories kept per failure signature


def _load(name: str) -> Any:
    if name in sys.modules:
        return sys.modules[name]
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # kinds imports mutate by name
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


mutate = _load("mutate")
kinds = _load("kinds")
forkserver = _load("forkserver")


@dataclass
class Outcome:
    kind: str
    verdict: str  # ran | refused | traceback | hang | memory | bad-error | bad-exit | ...
    signature: str
    seconds: float  # CPU
    rss_growth: int
    case_dir: Path
    argv: list[str]
    log: list[str]

    @property
    def passed(self) -> bool:
        """Ran or refused; a case *starved* of CPU by other processes on a shared machine (killed
        at the wall-clock limit while computing) is inconclusive, not a failure — it is counted
        and printed, and CI machines have their cores to themselves."""
        return self.verdict in ("ran", "refused", "starved")


@dataclass
class KindStats:
    cases: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    signatures: dict[str, list[Outcome]] = field(default_factory=lambda: defaultdict(list))
    seconds: float = 0.0
    max_seconds: float = 0.0
    max_rss: int = 0
    detail: list[str] = field(default_factory=list)  # failure lines of a pytest-xdist worker

    @property
    def failures(self) -> int:
        return (
            self.cases - self.verdicts["ran"] - self.verdicts["refused"] - self.verdicts["starved"]
        )


class Tally:
    def __init__(self) -> None:
        self.kinds: dict[str, KindStats] = defaultdict(KindStats)
        self.reruns: Counter[str] = Counter()  # cases run again after a CPU-limit kill, per kind

    def add(self, o: Outcome) -> None:
        s = self.kinds[o.kind]
        s.cases += 1
        s.verdicts[o.verdict] += 1
        s.seconds += o.seconds
        s.max_seconds = max(s.max_seconds, o.seconds)
        s.max_rss = max(s.max_rss, o.rss_growth)
        if not o.passed:
            s.signatures[f"{o.verdict}: {o.signature}"].append(o)

    def to_json(self) -> str:
        """The counts and failure lines, for the pytest-xdist controller (:meth:`merge`)."""
        kinds = {
            kind: {
                "cases": s.cases,
                "verdicts": dict(s.verdicts),
                "seconds": s.seconds,
                "max_seconds": s.max_seconds,
                "max_rss": s.max_rss,
                "detail": s.detail + self._detail(kind, s),
            }
            for kind, s in self.kinds.items()
        }
        return json.dumps({"kinds": kinds, "reruns": dict(self.reruns)})

    def merge(self, text: str) -> None:
        """Add a worker's tally (:meth:`to_json`): each kind runs in one worker, so the sums are
        the session's."""
        doc = json.loads(text)
        for kind, d in doc["kinds"].items():
            s = self.kinds[kind]
            s.cases += d["cases"]
            s.verdicts.update(d["verdicts"])
            s.seconds += d["seconds"]
            s.max_seconds = max(s.max_seconds, d["max_seconds"])
            s.max_rss = max(s.max_rss, d["max_rss"])
            s.detail += d["detail"]
        self.reruns.update(doc["reruns"])

    @staticmethod
    def _detail(kind: str, s: KindStats) -> list[str]:
        lines = []
        for sig, outs in sorted(s.signatures.items()):
            o = outs[0]
            lines.append(f"  [{kind}] {len(outs)}× {sig}")
            lines.append(f"      e.g. {' '.join(o.argv)[:160]!r} {'; '.join(o.log)[:200]!r}")
            lines.append(f"      kept in {o.case_dir}")
        return lines

    def table(self) -> list[str]:
        head = (
            f"{'kind':<11}{'cases':>7}{'ran':>7}{'exit 2':>8}{'starved':>8}{'traceb.':>9}{'hangs':>7}"
            f"{'memory':>8}{'other':>7}{'CPU s':>9}{'max s':>7}{'MiB max':>9}"
        )
        lines = [head]
        total = KindStats()
        for kind, s in sorted(self.kinds.items()):
            v = s.verdicts
            other = s.failures - v["traceback"] - v["hang"] - v["memory"]
            lines.append(
                f"{kind:<11}{s.cases:>7}{v['ran']:>7}{v['refused']:>8}{v['starved']:>8}"
                f"{v['traceback']:>9}"
                f"{v['hang']:>7}{v['memory']:>8}{other:>7}{s.seconds:>9.1f}{s.max_seconds:>7.2f}"
                f"{s.max_rss / 2**20:>9.0f}"
            )
            total.cases += s.cases
            total.verdicts.update(s.verdicts)
            total.seconds += s.seconds
        lines.append(
            f"{'all':<11}{total.cases:>7}{total.verdicts['ran']:>7}{total.verdicts['refused']:>8}"
            f"{total.verdicts['starved']:>8}"
            f"{total.verdicts['traceback']:>9}{total.verdicts['hang']:>7}"
            f"{total.verdicts['memory']:>8}{'':>7}{total.seconds:>9.1f}"
        )
        if self.reruns:
            each = ", ".join(f"{k} {v}" for k, v in sorted(self.reruns.items()))
            lines.append(f"  rerun once after a CPU-limit kill (judged on the rerun): {each}")
        for kind, s in sorted(self.kinds.items()):
            lines += s.detail + self._detail(kind, s)
        return lines


def _tree(root: Path) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            out.add(str((Path(dirpath) / name).relative_to(root)))
    return out


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _traceback_signature(err: str) -> str:
    last = err.strip().splitlines()[-1] if err.strip() else "?"
    exc = last.split(":", 1)[0]
    frames = [m for m in _FRAME.finditer(err) if "/pvegym/" in m[1] or "/policies/" in m[1]]
    where = ""
    if frames:
        f = frames[-1]
        where = f" at {f[1].split('/')[-2]}/{f[1].split('/')[-1]}:{f[3]}"
    return f"{exc}{where} ({last[len(exc) + 1 :].strip()[:80]})"


class Fuzz:
    """Session state: the fork servers, the root of case directories, options, the tally."""

    def __init__(self, config: pytest.Config) -> None:
        self.long = bool(config.getoption("--fuzz"))
        self.scale = float(config.getoption("--fuzz-scale") or (10.0 if self.long else 1.0))
        self.root = Path(tempfile.mkdtemp(prefix="pvegym-fuzz-"))
        # files outside every case directory whose content must never show in an output
        self.canary = f"PVEGYM-CANARY-{os.getpid()}-{id(self)}"
        for name in ("canary", "canary.csv"):
            (self.root / name).write_text(self.canary + "\n")
        passwd = Path("/etc/passwd")
        self.secrets = [self.canary] + (
            passwd.read_text().splitlines()[:1] if passwd.exists() else []
        )
        self.tally = Tally()
        # cases in parallel per pytest process: the cores shared among pytest-xdist's workers
        # (each fork server costs seconds of start-up; more servers than cores only add that)
        share = (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        self.jobs = int(config.getoption("--fuzz-jobs") or min(2, max(1, share)))
        self._idle: dict[bool, queue.Queue[Any]] = {False: queue.Queue(), True: queue.Queue()}
        self._started: dict[bool, int] = {False: 0, True: 0}
        self._servers: list[Any] = []
        self._lock = threading.Lock()
        self._n = 0

    def cases(self, ci: int) -> int:
        return max(1, round(ci * self.scale))

    def _server(self, torch: bool) -> Any:
        with self._lock:
            if self._idle[torch].empty() and self._started[torch] < self.jobs:
                self._started[torch] += 1
                server = forkserver.ForkServer(torch=torch)
                self._servers.append(server)
                return server
        return self._idle[torch].get()

    def close(self) -> None:
        for s in self._servers:
            s.close()
        kept = any(s.signatures for s in self.tally.kinds.values())
        if not kept:
            shutil.rmtree(self.root, ignore_errors=True)

    def _attempt(
        self, case: Any, case_dir: Path, n: int
    ) -> tuple[dict[str, Any], str, str, set[str]]:
        """Write the case's files into ``case_dir``, run it on a fork server: its reply, stdout,
        stderr and the files the directory held before it ran."""
        case_dir.mkdir()
        for rel, blob in case.files.items():
            p = case_dir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(blob)
        for make in case.special:
            make(case_dir)
        before = _tree(case_dir)
        io_dir = self.root / "_io"
        io_dir.mkdir(exist_ok=True)
        server = self._server(case.torch)
        try:
            reply = server.run(
                argv=case.argv,
                cwd=str(case_dir),
                stdout=str(io_dir / f"{n}.out"),
                stderr=str(io_dir / f"{n}.err"),
                env=case.env,
                cpu_s=TIMEOUT_S,
                wall_s=WALL_S,
                memory_bytes=MEMORY_BYTES,
            )
        finally:
            self._idle[case.torch].put(server)
        out = (io_dir / f"{n}.out").read_text(errors="replace")
        err = (io_dir / f"{n}.err").read_text(errors="replace")
        (io_dir / f"{n}.out").unlink()
        (io_dir / f"{n}.err").unlink()
        return reply, out, err, before

    def run_all(self, cases: list[Any]) -> list[Outcome]:
        """Run ``cases`` on up to :attr:`jobs` fork servers at once; judge and tally each."""
        with cf.ThreadPoolExecutor(max_workers=self.jobs) as pool:
            return list(pool.map(self.run, cases))

    def run(self, case: Any) -> Outcome:
        with self._lock:
            self._n += 1
            n = self._n
        case_dir = self.root / f"{case.kind}-{n:06d}"
        reply, out, err, before = self._attempt(case, case_dir, n)
        if reply["killed"] and reply["seconds"] < WALL_S:
            # killed at the CPU limit: run it once more, from fresh files. A case whose child
            # spent its budget compiling a numba kernel (a cold cache: the first child to need a
            # specialization compiles it, the next loads it) passes now; a real hang hangs again
            case.log.append(f"rerun after {reply['cpu_s']:.1f} s CPU")
            with self._lock:
                self.tally.reruns[case.kind] += 1
            shutil.rmtree(case_dir, ignore_errors=True)
            reply, out, err, before = self._attempt(case, case_dir, n)
        verdict, sig = self._judge(case, case_dir, reply, out, err, before)
        o = Outcome(
            case.kind,
            verdict,
            sig,
            reply["cpu_s"],
            reply["rss_growth_bytes"],
            case_dir,
            case.argv,
            case.log,
        )
        with self._lock:
            self.tally.add(o)
        stats = self.tally.kinds[case.kind]
        keep = not o.passed and len(stats.signatures[f"{verdict}: {sig}"]) <= KEEP_FAILURES
        if keep:
            (case_dir / "_stdout").write_text(out[-20000:])
            (case_dir / "_stderr").write_text(err[-20000:])
            (case_dir / "_argv").write_text(repr(case.argv) + "\n" + "\n".join(case.log))
        else:
            shutil.rmtree(case_dir, ignore_errors=True)
        return o

    def _judge(
        self, case: Any, case_dir: Path, reply: dict[str, Any], out: str, err: str, before: set[str]
    ) -> tuple[str, str]:
        code = reply["code"]
        if reply["killed"]:
            if reply["seconds"] >= WALL_S and reply["cpu_s"] > STARVED_CPU_S:
                return "starved", f"{reply['cpu_s']:.1f} s CPU in {WALL_S:g} s wall (machine busy)"
            what = "blocked" if reply["seconds"] >= WALL_S else f"{reply['cpu_s']:.0f} s CPU"
            return "hang", f"killed ({what}): {'; '.join(case.log)[:100]}"
        if "MemoryError" in err or reply["rss_growth_bytes"] > MEMORY_BYTES:
            return "memory", _traceback_signature(err) if "Traceback" in err else "RSS growth"
        if (case_dir / "pwned").exists():
            return "executed", "code from an input file ran"
        for secret in self.secrets:
            if secret and secret[:16] in out + err:
                return "leak", f"an output shows a file outside the inputs ({secret[:12]}…)"
        if "Traceback (most recent call last)" in err:
            return "traceback", _traceback_signature(err)
        if code < 0:
            return "crash", f"killed by signal {-code}"
        if code == 2:
            lines = err.rstrip("\n").split("\n")
            if len(lines) != 1 or not lines[0].strip():
                return "bad-error", f"{len(lines)} lines: {lines[0][:80]}"
            if len(lines[0]) > MAX_MESSAGE:
                return "bad-error", f"{len(lines[0])} characters: {lines[0][:80]}"
            return "refused", ""
        if code not in case.ok_codes:
            return "bad-exit", f"exit {code}: {err.strip()[-100:]}"
        new = _tree(case_dir) - before
        allowed = tuple(case.outputs)
        stray = sorted(p for p in new if not p.startswith(allowed))
        if stray:
            return "stray-file", f"wrote {stray[0][:80]}"
        if case.check is not None:
            problem = case.check(case_dir, out)
            if problem:
                return "bad-output", problem[:160]
        return "ran", ""


@pytest.fixture(scope="session")
def fuzz(request: pytest.FixtureRequest) -> Iterator[Fuzz]:
    f = Fuzz(request.config)
    request.config.stash[_KEY] = f
    yield f
    f.close()


_KEY = pytest.StashKey[Fuzz]()


_MERGED = pytest.StashKey[Tally]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand the tally to the controller, which prints the table."""
    f = session.config.stash.get(_KEY, None)
    out = getattr(session.config, "workeroutput", None)
    if f is not None and out is not None:
        out["pvegym_fuzz"] = f.tally.to_json()


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_testnodedown(node: Any, error: Any) -> None:
    """In the pytest-xdist controller: add a finished worker's tally (``-n N`` runs the kinds in
    N processes; the table is the session's)."""
    text = getattr(node, "workeroutput", {}).get("pvegym_fuzz")
    if text:
        node.config.stash.setdefault(_MERGED, Tally()).merge(text)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    f = config.stash.get(_KEY, None)
    tally = f.tally if f is not None else config.stash.get(_MERGED, None)
    if tally is None or not tally.kinds:
        return
    long = bool(config.getoption("--fuzz"))
    mode = "long (--fuzz)" if long else "CI (derandomized)"
    terminalreporter.write_sep("-", f"fuzz: cases per input kind, {mode}")
    for line in tally.table():
        terminalreporter.write_line(line)
