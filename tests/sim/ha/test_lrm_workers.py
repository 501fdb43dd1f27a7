"""The LRM's workers as asynchronous jobs (``max_workers > 0``), on upstream's test hardware.

Upstream's regression tests run every resource agent in place (``max_workers == 0``); a real node
forks up to ``max_workers`` (default 4) workers and collects them with ``waitpid``. pvegym's cluster
model needs the forked form: a live migration is a job that runs for minutes of simulated time.
Here the environment forks a job as a generator, resumes it once per ``waitpid`` poll, and its
clock advances with ``sleep`` as a real node's does. A migration whose plugin yields ``steps``
times therefore ends several LRM rounds after it started, and the CRM must keep the service in
``migrate`` (blocking the balancer) until the LRM reports the exit code.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pvegym.harness import read_testdir
from pvegym.harness.hardware import Hardware
from pvegym.harness.replay import upstream_policy
from pvegym.harness.sim_env import SimEnv
from pvegym.harness.sim_resources import VirtCT, VirtVM
from pvegym.harness.testhardware import TestHardware
from pvegym.sim.ha.resources import Job

DATA = Path(__file__).resolve().parents[2] / "data" / "upstream-tests"


class SlowVM(VirtVM):
    """A VM whose migration takes ``steps`` resumptions of its worker."""

    def __init__(self, hardware: Hardware, steps: int) -> None:
        super().__init__(hardware)
        self.steps = steps

    def migrate(self, haenv: Any, id: str, target: str, online: bool) -> Generator[str, Any, bool]:
        for _ in range(self.steps):
            yield "transferring"
        return super().migrate(haenv, id, target, online)


class ForkingEnv(SimEnv):
    """``SimEnv`` with forked workers: a job advances one step per ``waitpid``; ``sleep`` moves
    this daemon's clock (the loop of ``run_workers`` polls for 8 s of it)."""

    pids = itertools.count(1)
    max_workers = 2
    steps = 25
    running: ClassVar[dict[int, tuple[str, Job[int]]]] = {}
    peak = 0  # most workers running at once on one node

    def get_time(self) -> float:
        return self.cur_time + self.loop_delay

    def get_max_workers(self) -> int:
        return self.max_workers

    def fork_worker(self, job: Job[int]) -> Any:
        pid = next(self.pids)
        self.running[pid] = (self.nodename(), job)
        on_node = sum(1 for node, _ in self.running.values() if node == self.nodename())
        type(self).peak = max(type(self).peak, on_node)
        return pid

    def waitpid(self, handle: Any) -> int | None:
        _, job = self.running[handle]
        try:
            next(job)
        except StopIteration as stop:
            del self.running[handle]
            return (int(stop.value) & 0xFF) << 8
        return None

    def resource_plugin(self, service_type: str) -> Any:
        if service_type == "vm":
            return SlowVM(self.hardware, self.steps)
        return super().resource_plugin(service_type)


class SlowStopVM(VirtVM):
    """A VM whose shutdown takes 5 resumptions of its worker."""

    def shutdown(self, haenv: Any, id: str, timeout: Any = None) -> Generator[str, Any, None]:
        for _ in range(5):
            yield "stopping"
        super().shutdown(haenv, id, timeout)


class SlowStopCT(VirtCT):
    def shutdown(self, haenv: Any, id: str, timeout: Any = None) -> Generator[str, Any, None]:
        for _ in range(5):
            yield "stopping"
        super().shutdown(haenv, id, timeout)


class SlowStopEnv(ForkingEnv):
    running: ClassVar[dict[int, tuple[str, Job[int]]]] = {}
    peak = 0

    def resource_plugin(self, service_type: str) -> Any:
        cls = {"vm": SlowStopVM, "ct": SlowStopCT}.get(service_type)
        return None if cls is None else cls(self.hardware)


def _run(name: str, env_class: type[SimEnv]) -> TestHardware:
    td = read_testdir(DATA / name)
    hw = TestHardware(td.files, td.cmdlist, upstream_policy)
    for node, d in hw.nodes.items():
        d.crm_env = env_class(node, hw, "crm", d.crm_env.balancer_factory)
        d.lrm_env = env_class(node, hw, "lrm", d.lrm_env.balancer_factory)
    hw.simulate()
    return hw


def _messages(hw: TestHardware, needle: str) -> list[tuple[float, str]]:
    return [(e.t, e.source) for e in hw.log_entries if needle in e.message]


@pytest.fixture(autouse=True)
def _fresh_env_class():
    for cls in (ForkingEnv, SlowStopEnv):
        cls.running = {}
        cls.peak = 0
    yield


def test_slow_migration_keeps_the_service_migrating():
    """test-crs-dynamic-auto-rebalance2: the balancer's first motion (t=80) runs over several LRM
    rounds; the service stays in ``migrate`` (the balancer stays blocked) until the result."""
    hw = _run("test-crs-dynamic-auto-rebalance2", ForkingEnv)
    issued = _messages(hw, "service 'vm:101': state changed from 'started' to 'migrate'")
    end = _messages(hw, "service vm:101 - end migrate to node 'node2'")
    done = _messages(hw, "service 'vm:101': state changed from 'migrate' to 'started'")
    assert len(issued) == len(end) == len(done) == 1
    # in place the LRM finishes in its round right after the CRM's (the replay: 80 -> 81); here
    # the worker needs 25 polls of 1 s, at most 9 per LRM round: the third LRM round or later
    assert end[0][0] > issued[0][0] + 2 * 20
    # the CRM sees the exit code in its first round after the worker finished
    assert issued[0][0] < end[0][0] < done[0][0] <= end[0][0] + 20
    # while the worker ran, no second motion was issued (any_resource_motion_queued_or_running)
    balancer_lines = [t for t, _ in _messages(hw, "auto rebalance")]
    assert balancer_lines[0] == issued[0][0]
    assert len(balancer_lines) == 2
    assert balancer_lines[1] > done[0][0]


def test_max_workers_caps_concurrent_jobs():
    """test-crs-static4: a node with 10 services shuts down and stops them all at once (one stop
    job each); no more than ``max_workers`` of them run at a time (``run_workers``)."""
    hw = _run("test-crs-static4", SlowStopEnv)
    assert SlowStopEnv.peak == SlowStopEnv.max_workers
    stopped = _messages(hw, "service status ")
    assert len([t for t, _ in stopped if t >= 120]) >= 3  # the shutdown at 120 stopped them
    assert hw.log_entries[-1].message == "exit simulation - done"


def test_in_place_jobs_must_not_wait():
    """With ``max_workers == 0`` the LRM runs jobs in place: a plugin that waits is an error of
    the environment, reported (as upstream reports a dying worker) and not silently skipped."""

    class InPlaceSlow(SimEnv):
        def resource_plugin(self, service_type: str) -> Any:
            return SlowVM(self.hardware, 3) if service_type == "vm" else None

    with pytest.raises(RuntimeError, match="max_workers = 0"):
        _run("test-crs-dynamic-auto-rebalance2", InPlaceSlow)
