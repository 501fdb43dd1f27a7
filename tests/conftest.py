"""Shared test helpers."""

from collections.abc import Callable

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
