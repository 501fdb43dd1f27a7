"""Run fuzz cases fast and contained: one warmed-up Python process forks a child per case.

Importing pvegym (numba kernels, SciPy, Optuna) takes seconds and a fresh ``pvegym`` process per
case would spend most of the time there; running cases inside the test process would let one case
hang it, exhaust its memory or leave state behind (caches, ``sys.modules``). So a *fork server*
(this file run as a script) imports and warms pvegym once, then for each request forks a child
that runs ``pvegym.cli.main(argv)`` exactly as the console script would — with its own working
directory, stdout/stderr in files, an address-space limit (``RLIMIT_AS``: the server's size plus
the case's memory budget) and its own process group, which the server kills when the case runs
past its time budget (CPU time, see below). An uncaught exception prints its traceback and exits 1, as the real CLI.

The time budget is CPU time (``RLIMIT_CPU``: the machines are shared, and a loaded machine must
not turn a slow case into a "hang"), with a wall-clock limit for cases that block without
computing (a FIFO read). Protocol: one JSON request per line on stdin (``argv``, ``cwd``,
``stdout``, ``stderr``, ``env``, ``cpu_s``, ``wall_s``, ``memory_bytes``), one JSON reply per
line on stdout (``code``, ``seconds``, ``cpu_s``, ``killed``, ``rss_growth_bytes``).
:class:`ForkServer` is the client.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _child(req: dict[str, Any], limit: int) -> None:
    """In the forked child: never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        os.chdir(req["cwd"])
        os.environ.update(req.get("env", {}))
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdin = open(os.devnull)  # noqa: SIM115 - the child ends with os._exit
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        cpu = int(req["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL
        from pvegym.cli import main

        sys.argv = ["pvegym", *req["argv"]]
        try:
            code = main(list(req["argv"]))
        except SystemExit as exc:  # argparse: usage errors exit 2
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


def run_case(req: dict[str, Any]) -> dict[str, Any]:
    base_kib = _status_kib("VmRSS")
    limit = _status_kib("VmSize") * 1024 + int(req["memory_bytes"])
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        _child(req, limit)
    fd = os.pidfd_open(pid)
    killed = False
    try:
        ready, _, _ = select.select([fd], [], [], float(req["wall_s"]))
        if not ready:
            killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - started
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # workers a case started and left behind
    code = os.waitstatus_to_exitcode(status)
    return {
        "code": code,
        "seconds": seconds,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "killed": killed or code in (-signal.SIGXCPU, -signal.SIGKILL),
        "rss_growth_bytes": max(0, usage.ru_maxrss - base_kib) * 1024,
    }


def serve(torch: bool) -> None:
    """Import and warm pvegym (and PyTorch with stable-baselines3 when ``torch``), then serve."""
    import gc

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from pvegym.cli import main

        main(["simulate", "--scenario", "failure-loop", "--duration", "1m", "--json"])
        # live migrations run the migration kernels: numba compiles them on first use, and a
        # child that compiles them (cold cache) spends its CPU budget there, not on the case
        for policy in ("guest-centric", "patched"):
            main(
                ["simulate", "--scenario", "nonconverging-migration", "--json", "--policy", policy]
            )
        main(
            [
                "replay-upstream",
                str(
                    Path(__file__).parents[1]
                    / "data/upstream-tests/"
                    / "test-crs-dynamic-auto-rebalance0"
                ),
            ]
        )
        import optuna  # noqa: F401 - tuning cases
        import scipy.stats  # noqa: F401 - reports
        from matplotlib.figure import Figure

        Figure().savefig(io.BytesIO(), format="png")
        if torch:
            import sb3_contrib  # noqa: F401
            import stable_baselines3  # noqa: F401
            import torch as th

            import pvegym.learning.train  # noqa: F401

            th.set_num_threads(1)
            agent = Path(__file__).parents[2] / "results" / "train-maskable-ppo"
            main(
                [
                    "simulate",
                    "--scenario",
                    "small",
                    "--duration",
                    "2m",
                    "--json",
                    "--policy",
                    "learned",
                    "--param",
                    f"model={agent}",
                ]
            )
    gc.collect()
    gc.freeze()  # children touch fewer pages (no copy-on-write from the collector)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(run_case(json.loads(line))), flush=True)


class ForkServer:
    """The client: start a server (``torch`` preloads PyTorch) and run cases through it."""

    def __init__(self, torch: bool = False) -> None:
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONHASHSEED": "0",
        }
        self.proc = subprocess.Popen(
            [sys.executable, __file__] + (["--torch"] if torch else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = self._read()
        assert ready.get("ready"), ready

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server died (exit {self.proc.wait()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


if __name__ == "__main__":
    serve("--torch" in sys.argv[1:])
