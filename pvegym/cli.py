"""The ``pvegym`` command line (``docs/cli.md``).

Every sub-command lives in ``pvegym/commands/<name>.py`` with ``register(subparsers)``. Bad input of
any kind ends in one line on stderr naming the key and what is allowed, and exit code 2 — never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from pvegym.errors import ConfigError

COMMANDS = (
    "simulate",
    "migrate",
    "replay_upstream",
    "check_rules",
    "scenarios",
    "policies",
    "ablate",
    "bench",
    "benchmark",
    "run",
    "replay",
    "train",
    "tune",
    "import_cluster",
    "whatif",
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (and exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


#: commands that load scenarios, so may read workload traces
TRACE_COMMANDS = ("simulate", "run", "tune", "train", "replay")


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for (``pvegym.__version__``
    reads the package metadata)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
        import pvegym

        print(f"pvegym {pvegym.__version__}")  # stdout, as argparse's "version" action
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    """The parser with every sub-command. Command modules import the model (NumPy, numba) only
    inside their ``run``, so that building it — ``pvegym --help`` — stays fast."""
    parser = _Parser(prog="pvegym", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"pvegym.commands.{name}").register(sub)
    for name in (n for n in TRACE_COMMANDS if n in sub.choices):
        sub.choices[name].add_argument(
            "--trace-dir",
            action="append",
            default=[],
            metavar="DIR",
            help="also read workload traces from DIR (a trace_dir relative to it, or inside it); "
            "by default only the bundled traces and those beside the scenario file",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        for directory in getattr(args, "trace_dir", []):
            from pvegym.sim.trace_source import add_user_root

            add_user_root(directory)
        code: int = args.func(args)
    except ConfigError as err:
        print(f"pvegym {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pvegym: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a reader that stopped (e.g. `| head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
