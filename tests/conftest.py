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
