"""Command-line entry point: ``explorer <command> ...``.

Each command lives in its own module under ``explorer.commands`` and exposes
``register(subparsers)``, which adds a sub-parser whose ``func(args) -> int`` does the work.
Exit codes are a contract other tools rely on: 0 ok, 1 findings (a hazard, a recompile, a
failed run), 2 bad input. Bad input never shows a traceback: :class:`InputError` becomes one
line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from explorer.errors import InputError, MissingExtraError, one_line

#: Command modules, in the order ``explorer --help`` lists them.
COMMANDS: tuple[str, ...] = (
    "explorer.commands.schedule",
    "explorer.commands.check",
    "explorer.commands.fix",
    "explorer.commands.compile_probe",
    "explorer.commands.hlo",
    "explorer.commands.run",
    "explorer.commands.xla_run",
    "explorer.commands.read",
)

#: The command names each module registers, so that a run imports only its own command's module
#: (``hlo-diff`` need not pay for numpy and the schedule generators). A name missing here still
#: works: the full parser is built. ``tests/test_cli_lazy.py`` checks the table against ``register``.
COMMAND_NAMES: dict[str, str] = {
    "schedule": "explorer.commands.schedule",
    "check": "explorer.commands.check",
    "fix": "explorer.commands.fix",
    "compile-probe": "explorer.commands.compile_probe",
    "hlo-diff": "explorer.commands.hlo",
    "hlo-list": "explorer.commands.hlo",
    "run": "explorer.commands.run",
    "xla-run": "explorer.commands.xla_run",
    "read": "explorer.commands.read",
}


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its message to one line, like every other bad input.

    The usage block argparse prints first is left out: one line names the option and the
    constraint, and points at ``--help``.
    """

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser(modules: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The parser with the commands of ``modules`` (all of them by default)."""
    parser = _Parser(prog="explorer", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def _parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """Only the named command's module when the first word is a known command, else all."""
    if argv and argv[0] in COMMAND_NAMES:
        return build_parser((COMMAND_NAMES[argv[0]],))
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code (0 ok, 1 findings, 2 bad input)."""
    parser = _parser_for(sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(argv)
    args.argv = list(
        sys.argv[1:] if argv is None else argv
    )  # a command may re-run itself in a child
    try:
        return int(args.func(args))
    except (InputError, MissingExtraError) as exc:
        print(f"explorer {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"explorer {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # pragma: no cover - `explorer ... | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

__all__ = ["COMMANDS", "build_parser", "main"]
