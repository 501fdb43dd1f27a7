"""Shared test helpers."""

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from pvegym.cli import main

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """Run ``pvegym ARGV...`` in-process: ``(exit code, stdout, stderr)``."""

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzz", "the fuzz suite (tests/fuzz)")
    group.addoption(
        "--fuzz",
        action="store_true",
        help="long fuzz run: 10× the CI cases per input kind, random (not derandomized) draws",
    )
    group.addoption(
        "--fuzz-scale",
        type=float,
        default=None,
        help="cases per kind as a multiple of the CI counts (default 1, or 10 with --fuzz)",
    )
    group.addoption(
        "--fuzz-jobs",
        type=int,
        default=None,
        help="cases run at once (default: 2, or 1 on a one-core machine)",
    )


def variant(text: str, *changes: tuple[str, str], count: int = -1) -> str:
    """``text`` with each ``(old, new)`` of ``changes`` applied in turn (``str.replace``: ``count``
    occurrences, all by default) — a bad variant of a good config file. An ``old`` that is not in
    the text fails the test: a mistyped change would test the unchanged, good file instead."""
    for old, new in changes:
        assert old in text, f"{old!r} is not in the text"
        text = text.replace(old, new, count)
    return text


def write_study(
    directory: Path, template: str, name: str, n_trials: int, *changes: tuple[str, str]
) -> Path:
    """The study file ``template`` with its ``{name}`` and ``{n_trials}`` filled in and then
    ``changes`` applied (:func:`variant`), written to ``directory/NAME-N_TRIALS.toml``."""
    path = directory / f"{name}-{n_trials}.toml"
    path.write_text(variant(template.format(name=name, n_trials=n_trials), *changes))
    return path


#: the scenarios of a 2 × 2 tiny experiment: ``failure-loop`` seeds 0 and 1, and two instances of
#: the ``small`` family's test split
TWO_SCENARIOS_TWO_SEEDS = (("failure-loop", "[0, 1]"), ("small", "{ start = 1000000, count = 2 }"))


def tiny_experiment(
    name: str,
    *,
    metrics: Sequence[str] = ("moves",),
    duration: str = "1m",
    timeline_seeds: int = 0,
    bootstrap_resamples: int = 100,
    scenarios: Sequence[tuple[str, str]] = (("failure-loop", "[0]"),),
    policies: Sequence[str] = ("noop", "upstream"),
) -> str:
    """The text of a tiny experiment file (``pvegym run``): every scenario of ``scenarios``
    (name, TOML seeds) × every policy, episodes of ``duration``; few bootstrap resamples."""
    lines = [
        f'name = "{name}"',
        f"metrics = {json.dumps(list(metrics))}",
        "[episode]",
        f'duration = "{duration}"',
        "[report]",
        f"timeline_seeds = {timeline_seeds}",
        f"bootstrap_resamples = {bootstrap_resamples}",
    ]
    for scenario, seeds in scenarios:
        lines += ["[[scenarios]]", f'name = "{scenario}"', f"seeds = {seeds}"]
    for policy in policies:
        lines += ["[[policies]]", f'name = "{policy}"']
    return "\n" + "\n".join(lines) + "\n"
