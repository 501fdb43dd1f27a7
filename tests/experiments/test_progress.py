"""Progress bars: their clock starts after the kernels are compiled, so the ETA is the work's."""

import io
import time

import pytest

import pvegym.experiments.progress as progress


def test_the_clock_starts_after_the_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    ended: list[float] = []

    def slow_warm_up() -> None:  # as a fresh install compiling the kernels
        time.sleep(0.3)
        ended.append(time.time())

    monkeypatch.setattr(progress, "warm_up", slow_warm_up)
    monkeypatch.setattr(progress.sys, "stderr", io.StringIO())
    bar = progress.bar(10, "t", "episode", enabled=True)
    assert ended and bar.start_t >= ended[0]
    bar.close()


def test_no_bar_and_no_warm_up_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "warm_up", lambda: pytest.fail("warmed up for a hidden bar"))
    with progress.bar(10, "t", "episode", enabled=False) as bar:
        bar.update()
    assert bar.disable


def test_warm_up_runs_a_migration() -> None:
    progress.warm_up()  # must not raise: the scenario's balancer migrates at t = 30 s
    assert progress._warm
